import { describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/infra/db.ts';
import { eicarTestFile } from '../../src/infra/scanner/index.ts';
import { recordEvents } from '../../src/modules/events/repo.ts';
import type { TestProject } from '../support/coffer.ts';
import { initiate, put, upload } from '../support/files.ts';
import { PNG } from '../support/pipeline.ts';
import { type Endpoint, verifySignature } from '../support/receiver.ts';
import { deliveriesOf, EVENTS, expectSigned, register, webhooksSuite } from '../support/webhooks.ts';

// The deliveries of a project's events to its webhooks: which webhooks each event reaches, signed, in
// the envelope, from REST calls and from the pipeline.
const { coffer, receiver, newProject, pump, runFor } = webhooksSuite();

function envelope(project: TestProject, event: string, data: Record<string, unknown>) {
  return {
    event,
    timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    organization_id: project.organizationId,
    project_id: project.id,
    data,
  };
}

describe('deliveries of events', () => {
  it('sends file.uploaded, file.ready and file.deleted, signed, with the envelope (scanning off)', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint();
    const hook = await register(project, endpoint);

    const started = await initiate(project, { filename: 'notes.txt', bytes: 'hello hooks' });
    await pump(() => endpoint.requests.length === 1);
    const data = {
      file_id: started.file_id,
      filename: 'notes.txt',
      size: 11,
      mime_type: 'text/plain',
    };
    expectSigned(endpoint.requests[0]!, hook.signing_secret, 'file.uploaded');
    expect(endpoint.requests[0]!.json).toEqual(
      envelope(project, 'file.uploaded', { ...data, status: 'uploading' }),
    );
    expect(endpoint.requests[0]!.headers['x-coffer-delivery-attempt']).toBe('1');

    expect((await put(started.upload_url, 'hello hooks')).status).toBe(200);
    const confirmed = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(confirmed.body.status).toBe('ready');
    await pump(() => endpoint.requests.length === 2);
    expectSigned(endpoint.requests[1]!, hook.signing_secret, 'file.ready');
    expect(endpoint.requests[1]!.json).toEqual(envelope(project, 'file.ready', { ...data, status: 'ready' }));

    expect((await project.call('DELETE', `/files/${started.file_id}`)).status).toBe(200);
    await pump(() => endpoint.requests.length === 3);
    expectSigned(endpoint.requests[2]!, hook.signing_secret, 'file.deleted');
    expect(endpoint.requests[2]!.json).toEqual(
      envelope(project, 'file.deleted', { ...data, status: 'ready' }),
    );

    // Each event has its own id; the delivery log shows three delivered on the first attempt.
    const eventIds = endpoint.requests.map((r) => r.headers['x-coffer-event-id']);
    expect(new Set(eventIds).size).toBe(3);
    const log = await deliveriesOf(project, hook.id);
    expect(log.map((d) => d.event)).toEqual(['file.deleted', 'file.ready', 'file.uploaded']);
    for (const delivery of log) {
      expect(delivery).toEqual({
        id: expect.stringMatching(/^dlv_[0-9A-Z]{26}$/),
        webhook_id: hook.id,
        event: delivery.event,
        event_id: expect.stringMatching(/^evt_/),
        status: 'delivered',
        attempts: 1,
        next_attempt_at: null,
        last_response_status: 200,
        last_error: null,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      });
    }
    expect(log.map((d) => d.event_id).reverse()).toEqual(eventIds);
    expect(await deliveriesOf(project, hook.id, 'delivered')).toHaveLength(3);
    expect(await deliveriesOf(project, hook.id, 'pending')).toHaveLength(0);
  });

  it('sends file.ready, file.failed and file.quarantined from the pipeline (scanning on)', async () => {
    const project = await newProject({ virus_scan_enabled: true });
    const endpoint = receiver.endpoint();
    const hook = await register(project, endpoint);
    const files = [
      { filename: 'pixel.png', content_type: 'image/png', bytes: PNG, event: 'file.ready', status: 'ready' },
      {
        filename: 'x.png',
        content_type: 'image/png',
        bytes: Buffer.from('<!doctype html><html><body>hi</body></html>'),
        event: 'file.failed',
        status: 'failed',
      },
      {
        filename: 'eicar.txt',
        content_type: 'text/plain',
        bytes: eicarTestFile(),
        event: 'file.quarantined',
        status: 'quarantined',
      },
    ];
    for (const file of files) {
      const confirmed = await upload(project, file);
      expect(confirmed.body.status).toBe('processing');
      await pump(() => endpoint.requests.length === 1);
      const [uploaded] = endpoint.requests.splice(0);
      expectSigned(uploaded!, hook.signing_secret, 'file.uploaded');
      expect(uploaded!.json.data).toMatchObject({ file_id: confirmed.body.id, status: 'uploading' });

      while ((await coffer.services.pipeline.runOnce()) > 0);
      await pump(() => endpoint.requests.length === 1);
      const [outcome] = endpoint.requests.splice(0);
      expectSigned(outcome!, hook.signing_secret, file.event);
      expect(outcome!.json).toEqual(
        envelope(project, file.event, {
          file_id: confirmed.body.id,
          filename: file.filename,
          size: file.bytes.length,
          mime_type: file.content_type,
          status: file.status,
        }),
      );
    }
    await runFor(300);
    expect(endpoint.requests).toHaveLength(0);
  });

  it('delivers only to active webhooks of the project subscribed to the event', async () => {
    const project = await newProject();
    const elsewhere = await newProject();
    const deletedOnly = receiver.endpoint();
    const inactive = receiver.endpoint();
    const all = receiver.endpoint();
    const foreign = receiver.endpoint();
    const deletedHook = await register(project, deletedOnly, ['file.deleted']);
    const inactiveHook = await register(project, inactive, EVENTS, false);
    const allHook = await register(project, all);
    const foreignHook = await register(elsewhere, foreign);

    const confirmed = await upload(project, { filename: 'a.txt', bytes: 'abc' });
    await pump(() => all.requests.length === 2);
    await runFor(200);
    expect(all.requests.map((r) => r.headers['x-coffer-event']).sort()).toEqual([
      'file.ready',
      'file.uploaded',
    ]);
    expect(deletedOnly.requests).toHaveLength(0);
    expect(inactive.requests).toHaveLength(0);
    expect(foreign.requests).toHaveLength(0);
    expect(await deliveriesOf(project, deletedHook.id)).toEqual([]);
    expect(await deliveriesOf(project, inactiveHook.id)).toEqual([]);
    expect(await deliveriesOf(elsewhere, foreignHook.id)).toEqual([]);

    // Activated, the webhook receives the next event; the deletion reaches the file.deleted subscriber.
    expect(
      (await project.call('PUT', `/webhooks/${inactiveHook.id}`, { body: { is_active: true } })).status,
    ).toBe(200);
    expect((await project.call('DELETE', `/files/${confirmed.body.id}`)).status).toBe(200);
    await pump(
      () => all.requests.length === 3 && deletedOnly.requests.length === 1 && inactive.requests.length === 1,
    );
    for (const [endpoint, hook] of [
      [deletedOnly, deletedHook],
      [inactive, inactiveHook],
      [all, allHook],
    ] as const) {
      const last = endpoint.requests.at(-1)!;
      expectSigned(last, hook.signing_secret, 'file.deleted');
      expect(last.json.data).toMatchObject({ file_id: confirmed.body.id, status: 'ready' });
    }
    // One event, one event id, whichever webhook receives it.
    expect(
      new Set([deletedOnly, inactive, all].map((e) => e.requests.at(-1)!.headers['x-coffer-event-id'])).size,
    ).toBe(1);
    expect(foreign.requests).toHaveLength(0);
  });

  it('delivers the events of one change to the webhooks of each, in order, with one statement for all', async () => {
    const project = await newProject();
    const both = receiver.endpoint();
    const readyOnly = receiver.endpoint();
    const deletedOnly = receiver.endpoint();
    const bothHook = await register(project, both, ['file.uploaded', 'file.ready']);
    const readyHook = await register(project, readyOnly, ['file.ready']);
    const deletedHook = await register(project, deletedOnly, ['file.deleted']);
    const file = {
      id: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV',
      project_id: project.id,
      filename: 'both.txt',
      size_bytes: 4,
      content_type: 'text/plain',
    };
    const owner = { id: project.id, organization_id: project.organizationId };
    const record = (events: Parameters<typeof recordEvents>[2]) =>
      coffer.services.db.tx(async (q) => {
        const sent: string[] = [];
        const counted: Queryable = {
          query: (sql, params) => {
            sent.push(sql);
            return q.query(sql, params);
          },
          exec: (sql) => q.exec(sql),
        };
        return { ids: await recordEvents(counted, owner, events), statements: sent.length };
      });

    // A server-side write's two events: the events and their webhooks in one statement, every delivery in another.
    const written = await record([
      { type: 'file.uploaded', file: { ...file, status: 'uploading' } },
      { type: 'file.ready', file: { ...file, status: 'ready' } },
    ]);
    expect(written.statements).toBe(2);
    await pump(() => both.requests.length === 2 && readyOnly.requests.length === 1);
    const [uploadedId, readyId] = written.ids;
    const data = { file_id: file.id, filename: 'both.txt', size: 4, mime_type: 'text/plain' };
    const sentTo = (endpoint: Endpoint, eventId: string) =>
      endpoint.requests.find((request) => request.headers['x-coffer-event-id'] === eventId)!;
    expectSigned(sentTo(both, uploadedId!), bothHook.signing_secret, 'file.uploaded');
    expect(sentTo(both, uploadedId!).json).toEqual(
      envelope(project, 'file.uploaded', { ...data, status: 'uploading' }),
    );
    for (const [endpoint, hook] of [
      [both, bothHook],
      [readyOnly, readyHook],
    ] as const) {
      expectSigned(sentTo(endpoint, readyId!), hook.signing_secret, 'file.ready');
      expect(sentTo(endpoint, readyId!).json).toEqual(
        envelope(project, 'file.ready', { ...data, status: 'ready' }),
      );
    }
    // Made in the events' order (the log is newest first), each to its own webhook.
    expect(
      (await deliveriesOf(project, bothHook.id)).map((d) => [d.webhook_id, d.event, d.event_id]),
    ).toEqual([
      [bothHook.id, 'file.ready', readyId],
      [bothHook.id, 'file.uploaded', uploadedId],
    ]);
    expect((await deliveriesOf(project, readyHook.id)).map((d) => [d.webhook_id, d.event_id])).toEqual([
      [readyHook.id, readyId],
    ]);
    expect(await deliveriesOf(project, deletedHook.id)).toEqual([]);

    // An event no webhook subscribes to: no statement for deliveries.
    const failed = await record([{ type: 'file.failed', file: { ...file, status: 'failed' } }]);
    expect(failed.statements).toBe(1);
    await runFor(200);
    expect([both, readyOnly, deletedOnly].map((endpoint) => endpoint.requests.length)).toEqual([2, 1, 0]);
  });

  it('keeps signing with the original secret after an update', async () => {
    const project = await newProject();
    const first = receiver.endpoint();
    const second = receiver.endpoint();
    const hook = await register(project, first, ['file.uploaded']);
    second.secret = hook.signing_secret;
    const updated = await project.call('PUT', `/webhooks/${hook.id}`, {
      body: { url: second.url, events: ['file.uploaded', 'file.deleted'] },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).not.toHaveProperty('signing_secret');
    expect(updated.body.updated_at).not.toBe(hook.updated_at);

    await initiate(project, { filename: 'b.txt' });
    await pump(() => second.requests.length === 1);
    expect(first.requests).toHaveLength(0);
    expectSigned(second.requests[0]!, hook.signing_secret, 'file.uploaded');
    // The check can fail: another webhook's secret does not verify.
    const otherSecret = (await register(project, receiver.endpoint())).signing_secret;
    expect(
      verifySignature(
        otherSecret,
        second.requests[0]!.raw,
        second.requests[0]!.headers['x-coffer-signature'],
      ),
    ).toBe(false);
  });
});
