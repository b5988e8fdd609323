import {
  DeleteObjectCommand,
  GetBucketTaggingCommand,
  GetObjectCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, startCoffer, type TestCoffer } from '../../support/coffer.ts';
import { freePort } from '../../support/net.ts';
import { type Exposition, scrapeMetrics } from '../../support/prometheus.ts';
import { type Receiver, startReceiver } from '../../support/receiver.ts';
import { newS3Credential, s3ClientOf } from '../../support/s3-endpoint.ts';

// What an object stored or deleted through S3 leaves behind, as for any Coffer file: its webhook
// events, the audit log's entry naming the S3 credential, and the metrics.
let receiver: Receiver;
let coffer: TestCoffer;
let metricsPort: number;
beforeAll(async () => {
  receiver = await startReceiver();
  metricsPort = await freePort();
  coffer = await startCoffer(
    { COFFER_METRICS_PORT: String(metricsPort), COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
    { webhookCa: receiver.ca },
  );
});
afterAll(async () => {
  await coffer?.close();
  await receiver?.close();
});

const scrape = async (): Promise<Exposition> => (await scrapeMetrics(metricsPort)).metrics;

const count = (metrics: Exposition, name: string, labels: Record<string, string>) =>
  metrics.samples
    .filter((s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value))
    .reduce((sum, s) => sum + s.value, 0);

describe('an object stored through S3', () => {
  it('sends its webhook events, is audited as the S3 credential, and is counted in the metrics', async () => {
    const project = await coffer.newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 204 } });
    const webhook = await project.call('POST', '/webhooks', {
      body: { url: endpoint.url, events: ['file.uploaded', 'file.ready', 'file.deleted'] },
    });
    expect(webhook.status).toBe(201);
    const credential = await newS3Credential(coffer, project.id, [
      'files:read',
      'files:upload',
      'files:delete',
    ]);
    const { bucket } = (await project.call('GET', '')).body;
    const client = s3ClientOf(coffer, credential, { maxAttempts: 1 });
    const before = await scrape();

    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'reports/q3.txt',
        Body: 'third quarter',
        ContentType: 'text/plain',
      }),
    );
    await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'reports/q3.txt' }));
    const [file] = (await project.call('GET', '/files?q=q3.txt')).body.items;
    expect(file).toMatchObject({ filename: 'q3.txt', status: 'ready' });
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'reports/q3.txt' }));
    await expect(client.send(new GetBucketTaggingCommand({ Bucket: bucket }))).rejects.toThrow();

    for (let pass = 0; pass < 50 && endpoint.requests.length < 3; pass++) {
      await coffer.services.dispatcher.runOnce();
      await coffer.services.dispatcher.settle();
    }
    // Deliveries are sent concurrently: they may arrive in any order.
    expect(
      endpoint.requests.map((request) => [request.json.event, request.json.data.file_id]).sort(),
    ).toEqual([
      ['file.deleted', file.id],
      ['file.ready', file.id],
      ['file.uploaded', file.id],
    ]);

    const log = await coffer.call('GET', `/v1/projects/${project.id}/audit-log?action=file.delete`, {
      token: ADMIN_KEY,
    });
    expect(log.body.items).toEqual([
      expect.objectContaining({
        action: 'file.delete',
        actor_type: 's3_credential',
        actor_id: credential.id,
        targets: { file_id: file.id },
      }),
    ]);
    expect(JSON.stringify(log.body)).not.toContain(credential.secret_access_key);

    const after = await scrape();
    const grew = (name: string, labels: Record<string, string>) =>
      count(after, name, labels) - count(before, name, labels);
    const s3 = (operation: string, status_code: string) =>
      grew('coffer_s3_requests_total', { operation, status_code });
    expect(s3('PutObject', '200')).toBe(1);
    expect(s3('GetObject', '200')).toBe(1);
    expect(s3('DeleteObject', '204')).toBe(1);
    expect(s3('unsupported', '501')).toBe(1);
    expect(grew('coffer_uploads_total', { outcome: 'completed' })).toBe(1);
    expect((await scrapeMetrics(metricsPort)).text).not.toContain(credential.access_key_id);
  });
});
