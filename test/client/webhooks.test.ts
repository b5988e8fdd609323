import { createHmac } from 'node:crypto';
import { createClient, verifyWebhook } from '@coffer/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';
import { type Receiver, startReceiver } from '../support/receiver.ts';
import { bytesOf } from './support/harness.ts';

const SECRET = 'whsec_test_secret';
const body = Buffer.from(
  JSON.stringify({ event: 'file.ready', data: { file_id: 'file_1', filename: 'é.txt' } }),
);
const sign = (raw: Buffer | string, secret = SECRET) =>
  createHmac('sha256', secret).update(raw).digest('hex');

describe('verifyWebhook', () => {
  it('accepts the HMAC-SHA256 hex of the raw bytes, as a Buffer, text, ArrayBuffer or header list', async () => {
    const signature = sign(body);
    expect(await verifyWebhook(body, signature, SECRET)).toBe(true);
    expect(await verifyWebhook(body.toString('utf8'), signature, SECRET)).toBe(true);
    expect(await verifyWebhook(new Uint8Array(body).buffer, signature.toUpperCase(), SECRET)).toBe(true);
    expect(await verifyWebhook(body, [signature], SECRET)).toBe(true);
  });

  it('refuses another body, another secret, a truncated or malformed signature', async () => {
    const signature = sign(body);
    const tampered = Buffer.from(body);
    const at = tampered.length - 2;
    tampered.writeUInt8(tampered.readUInt8(at) ^ 1, at);
    expect(await verifyWebhook(tampered, signature, SECRET)).toBe(false);
    expect(await verifyWebhook(body, signature, 'whsec_other')).toBe(false);
    expect(await verifyWebhook(body, signature.slice(0, 63), SECRET)).toBe(false);
    expect(await verifyWebhook(body, `${signature.slice(0, 62)}zz`, SECRET)).toBe(false);
    expect(await verifyWebhook(body, undefined, SECRET)).toBe(false);
    expect(await verifyWebhook(body, '', SECRET)).toBe(false);
    // JSON parsed and written again is not the raw body.
    expect(await verifyWebhook(JSON.stringify(JSON.parse(body.toString()), null, 1), signature, SECRET)).toBe(
      false,
    );
  });
});

describe('webhooks through the client', () => {
  let receiver: Receiver;
  let coffer: TestCoffer;
  beforeAll(async () => {
    receiver = await startReceiver();
    coffer = await startCoffer(
      { COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', COFFER_WEBHOOK_RETRY_SCHEDULE: '0,0.2,0.2,0.2,0.2' },
      { workers: true, webhookCa: receiver.ca },
    );
  });
  afterAll(async () => {
    await coffer?.close();
    await receiver?.close();
  });

  it('manages webhooks and verifies a real delivery with the secret from create', async () => {
    const project = await coffer.newProject();
    const client = createClient({ baseUrl: coffer.url, apiKey: project.key });
    const endpoint = receiver.endpoint({ fallback: { status: 200 } });
    const created = await client.webhooks.create(project.id, { url: endpoint.url, events: ['file.ready'] });
    expect(created.signing_secret).toMatch(/^whsec_/);
    expect((await client.webhooks.list(project.id)).items.map((w) => w.id)).toEqual([created.id]);
    expect(await client.webhooks.get(project.id, created.id)).not.toHaveProperty('signing_secret');

    await client.upload(project.id, bytesOf(10), { filename: 'hook.bin' });
    const [received] = await endpoint.waitFor(1, 20_000);
    const header = received!.headers['x-coffer-signature'];
    expect(await verifyWebhook(received!.raw, header, created.signing_secret)).toBe(true);
    expect(await verifyWebhook(received!.raw, header, `${created.signing_secret}x`)).toBe(false);

    // The receiver has the request before the worker has recorded its answer: wait for the record.
    const deadline = Date.now() + 10_000;
    let { items } = await client.webhooks.deliveries(project.id, created.id, { status: 'delivered' });
    while (items.length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      ({ items } = await client.webhooks.deliveries(project.id, created.id, { status: 'delivered' }));
    }
    expect(items).toHaveLength(1);
    expect((await client.webhooks.redeliver(project.id, created.id, items[0]!.id)).status).toBe('pending');
    expect((await client.webhooks.update(project.id, created.id, { is_active: false })).is_active).toBe(
      false,
    );
    await client.webhooks.delete(project.id, created.id);
    await expect(client.webhooks.get(project.id, created.id)).rejects.toMatchObject({ status: 404 });
  });
});
