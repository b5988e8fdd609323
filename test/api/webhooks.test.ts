import { createHmac } from 'node:crypto';
import { createServer } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Db, Queryable } from '../../src/infra/db.ts';
import { claim } from '../../src/infra/jobs/index.ts';
import { eicarTestFile } from '../../src/infra/scanner/index.ts';
import { recordEvents } from '../../src/modules/events/repo.ts';
import {
  type ClaimedDelivery,
  type DeliveryStatus,
  deliveriesQueue,
  recordAttempts,
} from '../../src/modules/webhooks/delivery-repo.ts';
import {
  createDispatcher,
  type Dispatcher,
  type DispatcherOptions,
} from '../../src/modules/webhooks/dispatcher.ts';
import { secondDb } from '../support/backends.ts';
import { keyWith, type Reply, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, put, upload } from '../support/files.ts';
import { PNG } from '../support/pipeline.ts';
import { sleep } from '../support/processes.ts';
import {
  type Endpoint,
  NON_PUBLIC_URLS,
  type Received,
  type Receiver,
  startReceiver,
  verifySignature,
} from '../support/receiver.ts';

const EVENTS = ['file.uploaded', 'file.ready', 'file.failed', 'file.quarantined', 'file.deleted'];
const ENV = {
  COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  COFFER_WEBHOOK_RETRY_SCHEDULE: '0,0.2,0.2,0.2,0.2',
  COFFER_WEBHOOK_TIMEOUT_MS: '500',
};
const UNKNOWN_WEBHOOK = 'wh_01ARZ3NDEKTSV4RRFFQ69G5FAV';

let receiver: Receiver;
/** Private networks allowed (the receiver is on loopback), short retry schedule and timeout. */
let coffer: TestCoffer;
/** Every project this file creates: their pending deliveries are cancelled after each test. */
const projects: TestProject[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  coffer = await startCoffer(ENV, { webhookCa: receiver.ca });
});
afterAll(async () => {
  await coffer?.close();
  await receiver?.close();
});
afterEach(async () => {
  // No test leaves work behind for the next one's dispatcher runs.
  await coffer.services.dispatcher.settle();
  await coffer.services.db.query(
    "UPDATE deliveries SET status = 'cancelled' WHERE status = 'pending' AND project_id = ANY ($1::text[])",
    [projects.map((p) => p.id)],
  );
});

const quiet = pino({ level: 'silent' });

/** A dispatcher of the test's own, with a deadline no endpoint here comes near unless it hangs. */
const ownDispatcher = (options: Partial<DispatcherOptions> = {}, db: Db = coffer.services.db) =>
  createDispatcher({
    db,
    logger: quiet,
    options: {
      retrySchedule: [0, 0.2, 0.2, 0.2, 0.2],
      timeoutMs: 10_000,
      allowPrivateNetworks: true,
      ca: receiver.ca,
      ...options,
    },
  });

async function newProject(
  settings?: Parameters<TestCoffer['newProject']>[0],
  on: TestCoffer = coffer,
): Promise<TestProject> {
  const project = await on.newProject(settings);
  projects.push(project);
  return project;
}

function expectError(reply: Reply, status: number, code: string) {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body.error.code).toBe(code);
  expect(reply.body.error.message).toEqual(expect.any(String));
  expect(reply.body.error.request_id).toEqual(expect.any(String));
}

/** Registers a webhook for `endpoint` (201 expected) and gives the endpoint its secret. */
async function register(
  project: TestProject,
  endpoint: Endpoint,
  events: string[] = EVENTS,
  isActive?: boolean,
): Promise<{ id: string; signing_secret: string; created_at: string; updated_at: string }> {
  const reply = await project.call('POST', '/webhooks', {
    body: { url: endpoint.url, events, ...(isActive === undefined ? {} : { is_active: isActive }) },
  });
  expect(reply.status, JSON.stringify(reply.body)).toBe(201);
  endpoint.secret = reply.body.signing_secret;
  return reply.body;
}

async function deliveriesOf(project: TestProject, webhookId: string, status?: string): Promise<any[]> {
  const reply = await project.call(
    'GET',
    `/webhooks/${webhookId}/deliveries${status ? `?status=${status}` : ''}`,
  );
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  expect(reply.body.total).toBe(reply.body.items.length);
  return reply.body.items;
}

/** Runs the dispatcher (and waits for what it started) until `done` holds. */
async function pump(done: () => boolean | Promise<boolean>, timeoutMs = 5000, dispatcher?: Dispatcher) {
  const d = dispatcher ?? coffer.services.dispatcher;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await d.runOnce();
    await d.settle();
    if (await done()) return;
    if (Date.now() > deadline) throw new Error(`pump: condition not met after ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** Runs the dispatcher for `ms` whatever happens (to show that nothing more is sent). */
async function runFor(ms: number, dispatcher: Dispatcher = coffer.services.dispatcher) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    await dispatcher.runOnce();
    await dispatcher.settle();
    await sleep(20);
  }
}

/** Waits until one delivery is due, sends it and records the outcome: exactly one attempt. */
async function step(timeoutMs = 5000) {
  const d = coffer.services.dispatcher;
  const deadline = Date.now() + timeoutMs;
  while ((await d.runOnce()) === 0) {
    if (Date.now() > deadline) throw new Error('step: no delivery became due');
    await sleep(10);
  }
  await d.settle();
}

const hmac = (secret: string, raw: Buffer) => createHmac('sha256', secret).update(raw).digest('hex');

/** The checks every delivery request must pass. */
function expectSigned(request: Received, secret: string, event: string) {
  expect(request.method).toBe('POST');
  expect(request.headers['content-type']).toBe('application/json');
  expect(request.headers['x-coffer-signature']).toBe(hmac(secret, request.raw));
  expect(request.signatureValid).toBe(true);
  expect(request.headers['x-coffer-event']).toBe(event);
  expect(request.headers['x-coffer-event-id']).toMatch(/^evt_[0-9A-Z]{26}$/);
  expect(request.json.event).toBe(event);
}

function envelope(project: TestProject, event: string, data: Record<string, unknown>) {
  return {
    event,
    timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    organization_id: project.organizationId,
    project_id: project.id,
    data,
  };
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

describe('webhook endpoints', () => {
  it('creates with the secret shown once, lists and gets without it, updates, and deletes', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint();
    const created = await project.call('POST', '/webhooks', {
      body: { url: endpoint.url, events: ['file.uploaded', 'file.ready'] },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^wh_[0-9A-Z]{26}$/),
      url: endpoint.url,
      events: ['file.uploaded', 'file.ready'],
      is_active: true,
      signing_secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{32,}$/),
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const { id, signing_secret: secret } = created.body;
    const stored = {
      id,
      url: endpoint.url,
      events: ['file.uploaded', 'file.ready'],
      is_active: true,
      created_at: created.body.created_at,
      updated_at: created.body.updated_at,
    };

    const list = await project.call('GET', '/webhooks');
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ items: [stored], total: 1 });
    expect(JSON.stringify(list.body)).not.toContain(secret);
    const one = await project.call('GET', `/webhooks/${id}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(stored);

    const inactive = await project.call('POST', '/webhooks', {
      body: { url: endpoint.url, events: ['file.deleted'], is_active: false },
    });
    expect(inactive.status).toBe(201);
    expect(inactive.body.is_active).toBe(false);
    expect(inactive.body.signing_secret).not.toBe(secret);

    await sleep(5);
    const other = receiver.endpoint();
    const updated = await project.call('PUT', `/webhooks/${id}`, {
      body: { url: other.url, events: ['file.deleted', 'file.deleted'], is_active: false },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({
      ...stored,
      url: other.url,
      events: ['file.deleted'],
      is_active: false,
      updated_at: expect.any(String),
    });
    expect(new Date(updated.body.updated_at).getTime()).toBeGreaterThan(
      new Date(stored.updated_at).getTime(),
    );
    // Fields left out keep their value.
    const partial = await project.call('PUT', `/webhooks/${id}`, { body: { is_active: true } });
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ url: other.url, events: ['file.deleted'], is_active: true });
    expect(partial.body).not.toHaveProperty('signing_secret');

    const listed = await project.call('GET', '/webhooks');
    expect(listed.body.total).toBe(2);
    expect(listed.body.items.map((w: any) => w.id).sort()).toEqual([id, inactive.body.id].sort());
    for (const item of listed.body.items) expect(item).not.toHaveProperty('signing_secret');

    const deleted = await project.call('DELETE', `/webhooks/${id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expect((await project.call('GET', '/webhooks')).body).toEqual({
      items: [expect.objectContaining({ id: inactive.body.id })],
      total: 1,
    });
    expectError(await project.call('GET', `/webhooks/${id}`), 404, 'webhook_not_found');
    expectError(
      await project.call('PUT', `/webhooks/${id}`, { body: { is_active: true } }),
      404,
      'webhook_not_found',
    );
    expectError(await project.call('DELETE', `/webhooks/${id}`), 404, 'webhook_not_found');
  });

  it.each([
    ['plain http', 'http://127.0.0.1/hook'],
    ['another scheme', 'ftp://127.0.0.1/hook'],
    ['no URL at all', 'not a url'],
    ['a relative path', '/hooks/1'],
    ['an empty string', ''],
    ['a scheme without host', 'https://'],
    ['credentials', 'https://user:secret@127.0.0.1/hook'],
    ['more than 2048 characters', `https://127.0.0.1/${'a'.repeat(2048)}`],
    ['a line break', 'https://127.0.0.1/hook\n'],
    ['a tab inside', 'https://127.0.0.1/ho\tok'],
    ['a DEL character', 'https://127.0.0.1/hook\u007f'],
  ])('refuses %s with 422 invalid_url, on create and on update', async (_what, url) => {
    const project = await newProject();
    const reply = await project.call('POST', '/webhooks', { body: { url, events: ['file.ready'] } });
    expectError(reply, 422, 'invalid_url');
    expect(reply.body.error.details).toEqual({ field: 'url' });
    const hook = await register(project, receiver.endpoint());
    expectError(await project.call('PUT', `/webhooks/${hook.id}`, { body: { url } }), 422, 'invalid_url');
    expect((await project.call('GET', '/webhooks')).body.total).toBe(1);
  });

  it('refuses unknown or no event names with 422 VALIDATION_ERROR', async () => {
    const project = await newProject();
    const url = receiver.endpoint().url;
    const unknown = await project.call('POST', '/webhooks', {
      body: { url, events: ['file.ready', 'file.exploded'] },
    });
    expectError(unknown, 422, 'VALIDATION_ERROR');
    expect(unknown.body.error.details).toMatchObject({ field: 'events', value: 'file.exploded' });
    expectError(
      await project.call('POST', '/webhooks', { body: { url, events: [] } }),
      422,
      'VALIDATION_ERROR',
    );
    expectError(
      await project.call('POST', '/webhooks', { body: { url, events: ['FILE.READY'] } }),
      422,
      'VALIDATION_ERROR',
    );
    const hook = await register(project, receiver.endpoint());
    expectError(
      await project.call('PUT', `/webhooks/${hook.id}`, { body: { events: ['file.created'] } }),
      422,
      'VALIDATION_ERROR',
    );
    expect((await project.call('GET', '/webhooks')).body.total).toBe(1);
    expect((await project.call('GET', `/webhooks/${hook.id}`)).body.events).toEqual(EVENTS);
  });

  it('answers 404 webhook_not_found for an unknown webhook or one of another project', async () => {
    const mine = await newProject();
    const theirs = await newProject();
    const hook = await register(theirs, receiver.endpoint());
    for (const id of [UNKNOWN_WEBHOOK, 'nope', hook.id]) {
      expectError(await mine.call('GET', `/webhooks/${id}`), 404, 'webhook_not_found');
      expectError(
        await mine.call('PUT', `/webhooks/${id}`, { body: { is_active: false } }),
        404,
        'webhook_not_found',
      );
      expectError(await mine.call('DELETE', `/webhooks/${id}`), 404, 'webhook_not_found');
      expectError(await mine.call('GET', `/webhooks/${id}/deliveries`), 404, 'webhook_not_found');
      expectError(
        await mine.call('POST', `/webhooks/${id}/deliveries/dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV/redeliver`),
        404,
        'webhook_not_found',
      );
    }
    // Nothing happened to the other project's webhook.
    expect((await theirs.call('GET', `/webhooks/${hook.id}`)).body.is_active).toBe(true);
    // A key of one project on another project's path: 404 NOT_FOUND, never 403.
    expectError(
      await coffer.call('GET', `/v1/projects/${theirs.id}/webhooks`, { token: mine.key }),
      404,
      'NOT_FOUND',
    );
  });

  it('requires projects:read to list and projects:update to change, and refuses upload tokens', async () => {
    const project = await newProject();
    const hook = await register(project, receiver.endpoint());
    const body = { url: receiver.endpoint().url, events: ['file.ready'] };
    const paths = {
      list: ['GET', '/webhooks'],
      get: ['GET', `/webhooks/${hook.id}`],
      deliveries: ['GET', `/webhooks/${hook.id}/deliveries`],
      create: ['POST', '/webhooks'],
      update: ['PUT', `/webhooks/${hook.id}`],
      redeliver: ['POST', `/webhooks/${hook.id}/deliveries/dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV/redeliver`],
      remove: ['DELETE', `/webhooks/${hook.id}`],
    } as const;
    const call = (what: keyof typeof paths, token: string) =>
      project.call(paths[what][0], paths[what][1], {
        token,
        ...(what === 'create' || what === 'update' ? { body } : {}),
      });

    const filesOnly = (await keyWith(coffer, project, ['files:read', 'files:upload', 'upload_tokens:create']))
      .key;
    for (const what of Object.keys(paths) as (keyof typeof paths)[]) {
      expectError(await call(what, filesOnly), 403, 'INSUFFICIENT_SCOPE');
    }

    const reader = (await keyWith(coffer, project, ['projects:read'])).key;
    expect((await call('list', reader)).status).toBe(200);
    expect((await call('get', reader)).status).toBe(200);
    expect((await call('deliveries', reader)).status).toBe(200);
    for (const what of ['create', 'update', 'redeliver', 'remove'] as const) {
      expectError(await call(what, reader), 403, 'INSUFFICIENT_SCOPE');
    }

    const writer = (await keyWith(coffer, project, ['projects:update'])).key;
    expectError(await call('list', writer), 403, 'INSUFFICIENT_SCOPE');
    expect((await call('create', writer)).status).toBe(201);
    expect((await call('update', writer)).status).toBe(200);

    const token = (await project.call('POST', '/upload-tokens', { body: {} })).body.token as string;
    expect(token).toMatch(/^coffer_upload_token_/);
    for (const what of Object.keys(paths) as (keyof typeof paths)[]) {
      expectError(await call(what, token), 403, 'INSUFFICIENT_SCOPE');
    }
    expect((await call('remove', writer)).status).toBe(204);
  });
});

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

describe('retries', () => {
  it('retries a 500 (1 MB body), a redirect, a timeout and a 503 on schedule, then marks it dead', async () => {
    const project = await newProject();
    const target = receiver.endpoint();
    const endpoint = receiver.endpoint({
      script: [
        { status: 500, body: 'x'.repeat(1024 * 1024) },
        { redirect: target.url },
        'hang',
        { status: 503, body: 'maintenance' },
      ],
      fallback: { status: 500, body: 'still broken' },
    });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    const [pending] = await deliveriesOf(project, hook.id, 'pending');
    expect(pending).toMatchObject({
      status: 'pending',
      attempts: 0,
      last_response_status: null,
      last_error: null,
    });

    const current = async () => {
      const items = await deliveriesOf(project, hook.id);
      expect(items).toHaveLength(1);
      return items[0];
    };
    const expectRetryScheduled = (delivery: any) => {
      expect(delivery.status).toBe('pending');
      expect(new Date(delivery.next_attempt_at).getTime() - new Date(delivery.updated_at).getTime()).toBe(
        200,
      );
    };

    await step();
    let delivery = await current();
    expect(delivery).toMatchObject({ attempts: 1, last_response_status: 500 });
    expect(delivery.last_error).toMatch(/^HTTP 500: x+$/);
    expect(delivery.last_error.length).toBeLessThanOrEqual(1100);
    expectRetryScheduled(delivery);

    await step();
    delivery = await current();
    expect(delivery).toMatchObject({ attempts: 2, last_response_status: 302 });
    expect(delivery.last_error).toMatch(/redirect/);
    expectRetryScheduled(delivery);
    expect(target.requests).toHaveLength(0);

    const started = Date.now();
    await step();
    expect(Date.now() - started).toBeLessThan(2000);
    delivery = await current();
    expect(delivery).toMatchObject({ attempts: 3, last_response_status: null });
    expect(delivery.last_error).toMatch(/^(TimeoutError|UND_ERR_HEADERS_TIMEOUT): timed out$/);
    expectRetryScheduled(delivery);

    await step();
    delivery = await current();
    expect(delivery).toMatchObject({
      attempts: 4,
      last_response_status: 503,
      last_error: 'HTTP 503: maintenance',
    });
    expectRetryScheduled(delivery);

    await step();
    delivery = await current();
    expect(delivery).toMatchObject({
      status: 'dead',
      attempts: 5,
      next_attempt_at: null,
      last_response_status: 500,
      last_error: 'HTTP 500: still broken',
    });
    expect(await deliveriesOf(project, hook.id, 'dead')).toEqual([delivery]);
    expect(await deliveriesOf(project, hook.id, 'pending')).toEqual([]);

    // Never a sixth attempt.
    await runFor(800);
    expect(endpoint.requests).toHaveLength(5);
    expect(target.requests).toHaveLength(0);
    expect((await current()).status).toBe('dead');

    // Five attempts of one event: same event id and body, numbered 1..5, each signed, spaced by the schedule.
    const eventId = endpoint.requests[0]!.headers['x-coffer-event-id'];
    endpoint.requests.forEach((request, i) => {
      expectSigned(request, hook.signing_secret, 'file.uploaded');
      expect(request.headers['x-coffer-event-id']).toBe(eventId);
      expect(request.headers['x-coffer-delivery-attempt']).toBe(String(i + 1));
      expect(request.raw.equals(endpoint.requests[0]!.raw)).toBe(true);
      if (i > 0) expect(request.at - endpoint.requests[i - 1]!.at).toBeGreaterThanOrEqual(195);
    });
    // The attempt after the timeout came 0.2 s after the 0.5 s deadline.
    expect(endpoint.requests[3]!.at - endpoint.requests[2]!.at).toBeGreaterThanOrEqual(650);

    // Redelivery sends it again, as attempt 1 of the same event.
    endpoint.fallback = { status: 204 };
    const redelivered = await project.call(
      'POST',
      `/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`,
    );
    expect(redelivered.status).toBe(202);
    expect(redelivered.body).toMatchObject({ id: delivery.id, status: 'pending', attempts: 0 });
    await pump(() => endpoint.requests.length === 6);
    const again = endpoint.requests[5]!;
    expectSigned(again, hook.signing_secret, 'file.uploaded');
    expect(again.headers['x-coffer-event-id']).toBe(eventId);
    expect(again.headers['x-coffer-delivery-attempt']).toBe('1');
    expect(again.raw.equals(endpoint.requests[0]!.raw)).toBe(true);
    await pump(async () => (await current()).status === 'delivered');
    expect(await current()).toMatchObject({
      status: 'delivered',
      attempts: 1,
      last_response_status: 204,
      last_error: null,
      next_attempt_at: null,
    });
    expect(target.requests).toHaveLength(0);
  });

  it('counts a connection error as a failure, up to dead', async () => {
    const project = await newProject();
    const port = await closedPort();
    const created = await project.call('POST', '/webhooks', {
      body: { url: `https://127.0.0.1:${port}/hook`, events: ['file.uploaded'] },
    });
    expect(created.status).toBe(201);
    await initiate(project);
    await pump(async () => (await deliveriesOf(project, created.body.id, 'dead')).length === 1);
    const [dead] = await deliveriesOf(project, created.body.id);
    expect(dead).toMatchObject({ status: 'dead', attempts: 5, last_response_status: null });
    expect(dead.last_error).toMatch(/^ECONNREFUSED: /);
  });

  it('refuses to redeliver a pending delivery with 409 INVALID_STATE, and an unknown one with 404', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint();
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    const [pending] = await deliveriesOf(project, hook.id);
    expect(pending.status).toBe('pending');
    const reply = await project.call('POST', `/webhooks/${hook.id}/deliveries/${pending.id}/redeliver`);
    expectError(reply, 409, 'INVALID_STATE');
    expectError(
      await project.call('POST', `/webhooks/${hook.id}/deliveries/dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV/redeliver`),
      404,
      'NOT_FOUND',
    );
    // A delivery of another webhook of the same project is not this webhook's.
    const other = await register(project, receiver.endpoint(), ['file.ready']);
    expectError(
      await project.call('POST', `/webhooks/${other.id}/deliveries/${pending.id}/redeliver`),
      404,
      'NOT_FOUND',
    );
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({
      id: pending.id,
      status: 'pending',
      attempts: 0,
    });

    // Delivered, it can be sent again.
    await pump(() => endpoint.requests.length === 1);
    expect(
      (await project.call('POST', `/webhooks/${hook.id}/deliveries/${pending.id}/redeliver`)).status,
    ).toBe(202);
    await pump(() => endpoint.requests.length === 2);
    expect(endpoint.requests[1]!.headers['x-coffer-event-id']).toBe(
      endpoint.requests[0]!.headers['x-coffer-event-id'],
    );
  });

  it('cancels pending retries when the webhook is deleted, and sends nothing more', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 500 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    await step();
    const [failed] = await deliveriesOf(project, hook.id);
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, last_response_status: 500 });

    expect((await project.call('DELETE', `/webhooks/${hook.id}`)).status).toBe(204);
    expectError(await project.call('GET', `/webhooks/${hook.id}/deliveries`), 404, 'webhook_not_found');
    const rows = await coffer.services.db.query<{ status: string; attempts: number }>(
      'SELECT status, attempts FROM deliveries WHERE webhook_id = $1',
      [hook.id],
    );
    expect(rows).toEqual([{ status: 'cancelled', attempts: 1 }]);
    await runFor(700);
    expect(endpoint.requests).toHaveLength(1);
  });

  it('keeps a delivery cancelled when the webhook is deleted during an attempt', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: 'hang' });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    expect(await coffer.services.dispatcher.runOnce()).toBe(1);
    await endpoint.waitFor(1);
    expect((await project.call('DELETE', `/webhooks/${hook.id}`)).status).toBe(204);
    await coffer.services.dispatcher.settle();
    const rows = await coffer.services.db.query<{ status: string }>(
      'SELECT status FROM deliveries WHERE webhook_id = $1',
      [hook.id],
    );
    expect(rows).toEqual([{ status: 'cancelled' }]);
    await runFor(700);
    expect(endpoint.requests).toHaveLength(1);
  });

  it('sends nothing more to a webhook deactivated while a retry is pending', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 500 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    await step();
    expect((await project.call('PUT', `/webhooks/${hook.id}`, { body: { is_active: false } })).status).toBe(
      200,
    );
    await runFor(700);
    expect(endpoint.requests).toHaveLength(1);
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({ status: 'cancelled', attempts: 1 });
  });
});

describe('durability and concurrency', () => {
  it('goes on after a restart from the attempt where it was', async () => {
    const env = { ...ENV, COFFER_WEBHOOK_RETRY_SCHEDULE: '0,1,0.2,0.2,0.2' };
    const first = await startCoffer(env, { workers: true, webhookCa: receiver.ca });
    let second: TestCoffer | undefined;
    try {
      const project = await newProject(undefined, first);
      const endpoint = receiver.endpoint({ script: [{ status: 500 }], fallback: { status: 200 } });
      const hook = await register(project, endpoint, ['file.uploaded']);
      await initiate(project);
      await endpoint.waitFor(1);
      const log = () =>
        (second ?? first).call('GET', `/v1/projects/${project.id}/webhooks/${hook.id}/deliveries`, {
          token: project.key,
        });
      const deadline = Date.now() + 5000;
      while (
        (await log()).body.items[0].attempts !== 1 ||
        (await log()).body.items[0].last_response_status !== 500
      ) {
        if (Date.now() > deadline) throw new Error('attempt 1 was not recorded');
        await sleep(20);
      }
      const pending = (await log()).body.items[0];
      expect(pending.status).toBe('pending');
      expect(new Date(pending.next_attempt_at).getTime()).toBeGreaterThan(Date.now());
      await first.close();

      second = await startCoffer(env, { workers: true, webhookCa: receiver.ca });
      await endpoint.waitFor(2);
      const [one, two] = endpoint.requests;
      expect(two!.headers['x-coffer-delivery-attempt']).toBe('2');
      expect(two!.headers['x-coffer-event-id']).toBe(one!.headers['x-coffer-event-id']);
      expect(two!.signatureValid).toBe(true);
      expect(two!.at - one!.at).toBeGreaterThanOrEqual(995);
      const deadline2 = Date.now() + 5000;
      while ((await log()).body.items[0].status !== 'delivered') {
        if (Date.now() > deadline2) throw new Error('attempt 2 was not recorded');
        await sleep(20);
      }
      expect((await log()).body.items[0]).toMatchObject({
        status: 'delivered',
        attempts: 2,
        last_response_status: 200,
      });
      await sleep(300);
      expect(endpoint.requests).toHaveLength(2);
    } finally {
      await first.close().catch(() => {});
      await second?.close();
    }
  });

  it('never sends a sixth attempt when the worker of the fifth stopped before recording it', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 200 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    // As a worker leaves it when it dies during attempt 5: claimed (counted), its lease run out.
    await coffer.services.db.query(
      "UPDATE deliveries SET attempts = 5, next_attempt_at = now() - interval '1 second' WHERE webhook_id = $1",
      [hook.id],
    );
    expect(await coffer.services.dispatcher.runOnce()).toBe(0);
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({ status: 'dead', attempts: 5 });
    await runFor(300);
    expect(endpoint.requests).toHaveLength(0);
  });

  it('never sends the same attempt twice from two dispatchers', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({
      script: Array.from({ length: 8 }, () => ({ status: 500, delayMs: 30 })),
      fallback: { status: 200, delayMs: 30 },
    });
    const hook = await register(project, endpoint, ['file.uploaded']);
    for (let i = 0; i < 12; i++) await initiate(project, { filename: `f${i}.txt` });
    const other = await secondDb();
    const options = {
      retrySchedule: [0, 0.05, 0.05, 0.05, 0.05],
      timeoutMs: 2000,
      allowPrivateNetworks: true,
      ca: receiver.ca,
    };
    const a = createDispatcher({ db: coffer.services.db, logger: quiet, options });
    const b = createDispatcher({ db: other, logger: quiet, options });
    try {
      const allDelivered = async () => (await deliveriesOf(project, hook.id, 'delivered')).length === 12;
      await Promise.all([pump(allDelivered, 10_000, a), pump(allDelivered, 10_000, b)]);
      await Promise.all([runFor(300, a), runFor(300, b)]);
    } finally {
      await a.close();
      await b.close();
      if (other !== coffer.services.db) await other.close();
    }
    const seen = new Map<string, number>();
    for (const request of endpoint.requests) {
      expect(request.signatureValid).toBe(true);
      const key = `${request.headers['x-coffer-delivery-id']}#${request.headers['x-coffer-delivery-attempt']}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    expect(
      [...seen.values()].every((count) => count === 1),
      JSON.stringify([...seen]),
    ).toBe(true);
    const log = await deliveriesOf(project, hook.id);
    expect(log.map((d) => d.status)).toEqual(Array(12).fill('delivered'));
    // Every attempt recorded was sent exactly once: 12 deliveries, 8 of them needing a second attempt.
    expect(log.reduce((sum, d) => sum + d.attempts, 0)).toBe(20);
    expect(endpoint.requests).toHaveLength(20);
    for (const delivery of log) {
      const attempts = endpoint.requests
        .filter((r) => r.headers['x-coffer-delivery-id'] === delivery.id)
        .map((r) => r.headers['x-coffer-delivery-attempt']);
      expect(attempts).toEqual(delivery.attempts === 1 ? ['1'] : ['1', '2']);
    }
  });

  it('keeps an attempt that outlasts its lease to its dispatcher (heartbeat): sent once', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 200, delayMs: 3500 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    const other = await secondDb();
    const options = {
      retrySchedule: [0, 0.05, 0.05, 0.05, 0.05],
      timeoutMs: 10_000,
      allowPrivateNetworks: true,
      ca: receiver.ca,
      leaseSeconds: 1,
    };
    const a = createDispatcher({ db: coffer.services.db, logger: quiet, options });
    const b = createDispatcher({ db: other, logger: quiet, options });
    try {
      expect(await a.runOnce()).toBe(1);
      let done = false;
      const sending = a.settle().finally(() => {
        done = true;
      });
      while (!done) {
        await b.runOnce();
        await sleep(100);
      }
      await sending;
      await b.settle();
    } finally {
      await a.close();
      await b.close();
      if (other !== coffer.services.db) await other.close();
    }
    expect(endpoint.requests).toHaveLength(1);
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  it('does not hold deliveries to a fast endpoint behind a hanging one', async () => {
    const project = await newProject();
    const slow = receiver.endpoint({ fallback: 'hang' });
    const fast = receiver.endpoint({ fallback: { status: 200 } });
    const hook = await register(project, slow, ['file.uploaded']);
    const fastHook = await register(project, fast, ['file.ready']);
    // Five deliveries to the hanging endpoint are due first, then one to the fast one.
    const started = [];
    for (let i = 0; i < 5; i++) started.push(await initiate(project, { filename: `s${i}.txt`, bytes: 'x' }));
    expect((await put(started[0]!.upload_url, 'x')).status).toBe(200);
    expect((await project.call('POST', `/files/${started[0]!.file_id}/confirm`)).body.status).toBe('ready');

    // The service's dispatcher, with a deadline long enough that the slow requests surely still hang.
    const dispatcher = ownDispatcher();
    try {
      const began = Date.now();
      expect(await dispatcher.runOnce()).toBe(6);
      await fast.waitFor(1, 3000);
      const deadline = Date.now() + 3000;
      while ((await deliveriesOf(project, fastHook.id, 'delivered')).length !== 1) {
        if (Date.now() > deadline) throw new Error('the fast delivery was not recorded');
        await sleep(10);
      }
      // Delivered while none of the slow ones has an outcome: all five are held open by the endpoint.
      const slowLog = await deliveriesOf(project, hook.id);
      expect(slowLog.map((d) => [d.status, d.attempts, d.last_error])).toEqual(
        Array(5).fill(['pending', 1, null]),
      );
      await slow.waitFor(5, 3000);
      expect(slow.hanging).toBe(5);
      expect(Date.now() - began).toBeLessThan(5000);

      // Once the slow endpoint answers, those attempts finish too.
      slow.release(503);
      await dispatcher.settle();
      const failed = await deliveriesOf(project, hook.id, 'pending');
      expect(failed.map((d) => [d.attempts, d.last_response_status])).toEqual(Array(5).fill([1, 503]));
    } finally {
      slow.release(503);
      await dispatcher.close();
    }
  });

  it('sends at most its concurrency at once; the deliveries claimed beyond wait for a slot, then get their own deadline', async () => {
    const project = await newProject();
    const slow = receiver.endpoint({ fallback: 'hang' });
    const hook = await register(project, slow, ['file.uploaded']);
    for (let i = 0; i < 4; i++) await initiate(project, { filename: `c${i}.txt` });
    const dispatcher = ownDispatcher({ concurrency: 2, timeoutMs: 1000 });
    try {
      // All four claimed at once (the runner holds twice as many deliveries as it sends), two sent.
      expect(await dispatcher.runOnce()).toBe(4);
      await slow.waitFor(2, 3000);
      expect(slow.requests).toHaveLength(2);
      // The two that waited are sent once the first two time out, and time out in their turn.
      await dispatcher.settle();
      expect(new Set(slow.requests.map((r) => r.headers['x-coffer-delivery-id'])).size).toBe(4);
      const timedOut = await deliveriesOf(project, hook.id, 'pending');
      expect(timedOut.map((d) => [d.attempts, d.last_response_status])).toEqual(Array(4).fill([1, null]));
      for (const delivery of timedOut) expect(delivery.last_error).toMatch(/: timed out$/);
    } finally {
      slow.release(503);
      await dispatcher.close();
    }
  });

  it('gives up on a hanging endpoint at COFFER_WEBHOOK_TIMEOUT_MS without holding back the others', async () => {
    const project = await newProject();
    const slow = receiver.endpoint({ fallback: 'hang' });
    const fast = receiver.endpoint({ fallback: { status: 200 } });
    const hook = await register(project, slow, ['file.uploaded']);
    const fastHook = await register(project, fast, ['file.uploaded']);
    await initiate(project);
    const began = Date.now();
    expect(await coffer.services.dispatcher.runOnce()).toBe(2);
    await coffer.services.dispatcher.settle();
    const elapsed = Date.now() - began;
    expect(elapsed).toBeGreaterThanOrEqual(450);
    expect(elapsed).toBeLessThan(3000);
    expect((await deliveriesOf(project, fastHook.id))[0]).toMatchObject({ status: 'delivered', attempts: 1 });
    const [timedOut] = await deliveriesOf(project, hook.id);
    expect(timedOut).toMatchObject({ status: 'pending', attempts: 1, last_response_status: null });
    expect(timedOut.last_error).toMatch(/^(TimeoutError|UND_ERR_HEADERS_TIMEOUT): timed out$/);
    expect(fast.requests).toHaveLength(1);
    expect(slow.requests).toHaveLength(1);
  });
});

describe('claims and outcomes in batches', () => {
  it('sends a backlog due at once, each delivery once, many claimed and recorded per statement', async () => {
    const project = await newProject();
    // Slow answers keep slots busy, so that claims meet a runner with few of them free.
    const endpoints = [0, 1, 2].map(() => receiver.endpoint({ fallback: { status: 200, delayMs: 100 } }));
    const hooks: { id: string }[] = [];
    for (const endpoint of endpoints) hooks.push(await register(project, endpoint, ['file.uploaded']));
    for (let i = 0; i < 40; i++) await initiate(project, { filename: `backlog${i}.txt` });
    // The dispatcher's statements, counted: 120 deliveries, 32 held at once (16 requests in flight).
    const claims: number[] = [];
    let outcomes = 0;
    const db = coffer.services.db;
    const counted = {
      ...db,
      async query<T>(sql: string, params?: unknown[]) {
        const rows = await db.query<T>(sql, params);
        if (sql.includes('SKIP LOCKED')) claims.push(rows.length);
        else if (sql.startsWith('UPDATE deliveries d SET status')) outcomes++;
        return rows;
      },
    };
    const dispatcher = ownDispatcher({ concurrency: 16 }, counted);
    try {
      const delivered = async () =>
        (await project.call('GET', `/webhooks/${hooks[2]!.id}/deliveries?status=delivered`)).body.total ===
        40;
      // Claims run while deliveries are in flight, not only once the runner is idle.
      const deadline = Date.now() + 10_000;
      while (!(endpoints.every((e) => e.requests.length >= 40) && (await delivered()))) {
        if (Date.now() > deadline) throw new Error('the backlog was not delivered within 10 s');
        if ((await dispatcher.runOnce()) === 0) await sleep(20);
      }
      await dispatcher.settle();
      await runFor(200, dispatcher);
    } finally {
      await dispatcher.close();
    }
    for (const [i, endpoint] of endpoints.entries()) {
      expect(endpoint.requests).toHaveLength(40);
      const ids = new Set(endpoint.requests.map((r) => r.headers['x-coffer-delivery-id']));
      expect(ids.size).toBe(40);
      for (const request of endpoint.requests) {
        expect(request.signatureValid).toBe(true);
        expect(request.headers['x-coffer-delivery-attempt']).toBe('1');
      }
      const log = await deliveriesOf(project, hooks[i]!.id);
      expect(log.map((d) => [d.status, d.attempts])).toEqual(Array(40).fill(['delivered', 1]));
    }
    // The first claim fills all 32 slots; later ones wait for at least a quarter of them to free
    // (the last takes what is left).
    const taken = claims.filter((n) => n > 0);
    expect(taken[0]).toBe(32);
    expect(taken.length).toBeGreaterThan(2);
    for (const n of taken.slice(1, -1)) expect(n).toBeGreaterThanOrEqual(8);
    expect(outcomes).toBeLessThan(120);
  });
});

describe('outcomes recorded in batches', () => {
  it('records each delivery of a batch its own outcome: delivered, retried with its error, on schedule', async () => {
    const project = await newProject();
    const ok = receiver.endpoint({ fallback: { status: 200 } });
    const broken = receiver.endpoint({ fallback: { status: 500, body: 'broken' } });
    const gone = receiver.endpoint({ fallback: { status: 410, body: 'gone' } });
    const accepted = receiver.endpoint({ fallback: { status: 202 } });
    const hooks = [
      { hook: await register(project, ok, ['file.uploaded']), status: 'delivered', code: 200, error: null },
      {
        hook: await register(project, broken, ['file.uploaded']),
        status: 'pending',
        code: 500,
        error: 'HTTP 500: broken',
      },
      {
        hook: await register(project, gone, ['file.uploaded']),
        status: 'pending',
        code: 410,
        error: 'HTTP 410: gone',
      },
      {
        hook: await register(project, accepted, ['file.uploaded']),
        status: 'delivered',
        code: 202,
        error: null,
      },
    ];
    // 6 events × 4 webhooks: 24 attempts claimed at once, finishing together, their outcomes mixed.
    for (let i = 0; i < 6; i++) await initiate(project, { filename: `b${i}.txt` });
    // A dispatcher of its own, with a deadline no endpoint here comes near.
    const dispatcher = ownDispatcher();
    try {
      expect(await dispatcher.runOnce()).toBe(24);
      await dispatcher.settle();
    } finally {
      await dispatcher.close();
    }
    for (const { hook, status, code, error } of hooks) {
      const log = await deliveriesOf(project, hook.id);
      expect(log).toHaveLength(6);
      for (const delivery of log) {
        expect(delivery).toMatchObject({
          status,
          attempts: 1,
          last_response_status: code,
          last_error: error,
        });
        if (status === 'pending') {
          // Attempt 2 is due the schedule's 0.2 s after this attempt was recorded.
          expect(new Date(delivery.next_attempt_at).getTime() - new Date(delivery.updated_at).getTime()).toBe(
            200,
          );
        } else expect(delivery.next_attempt_at).toBeNull();
      }
    }
    for (const endpoint of [ok, broken, gone, accepted]) expect(endpoint.requests).toHaveLength(6);
  });

  it('writes nothing for an attempt whose lease lapsed and was claimed again; the new holder records its own', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint();
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    await initiate(project);
    const { db } = coffer.services;
    const queue = deliveriesQueue({ firstDelaySeconds: 0, maxAttempts: 5 });
    const claimAll = async () =>
      (await claim(db, queue, { kinds: ['deliver'], limit: 100, leaseSeconds: 30 })).filter(
        (delivery) => delivery.url === endpoint.url,
      );
    const first = await claimAll();
    expect(first).toHaveLength(2);
    // The first worker stopped between claim and record: once its lease runs out, both are due again.
    expect(await claimAll()).toEqual([]);
    await db.query(
      "UPDATE deliveries SET next_attempt_at = now() - interval '1 second' WHERE webhook_id = $1",
      [hook.id],
    );
    const second = await claimAll();
    expect(second.map((d) => [d.id, d.attempts]).sort()).toEqual(first.map((d) => [d.id, 2]).sort());

    const outcome = (lease: ClaimedDelivery, status: DeliveryStatus, code: number) => ({
      lease,
      status,
      delaySeconds: 0,
      responseStatus: code,
      error: null,
    });
    // One batch with the lapsed attempts (they would mark the deliveries dead) and one current one.
    const recorded = await recordAttempts(db, [
      outcome(first[0]!, 'dead', 500),
      outcome(first[1]!, 'dead', 500),
      outcome(second[1]!, 'delivered', 200),
    ]);
    expect([...recorded]).toEqual([[second[1]!.id, 'delivered']]);
    const log = new Map((await deliveriesOf(project, hook.id)).map((d) => [d.id, d]));
    expect(log.get(second[0]!.id)).toMatchObject({
      status: 'pending',
      attempts: 2,
      last_response_status: null,
    });
    expect(log.get(second[1]!.id)).toMatchObject({
      status: 'delivered',
      attempts: 2,
      last_response_status: 200,
    });
    // Recorded once: the same outcome again (its lease is spent) writes nothing more.
    expect((await recordAttempts(db, [outcome(second[1]!, 'dead', 500)])).size).toBe(0);
    expect((await recordAttempts(db, [outcome(second[0]!, 'delivered', 204)])).size).toBe(1);
    expect((await deliveriesOf(project, hook.id)).map((d) => d.status)).toEqual(['delivered', 'delivered']);
    expect(endpoint.requests).toHaveLength(0);
  });
});

describe('SSRF protection (private networks not allowed)', () => {
  let strict: TestCoffer;
  beforeAll(async () => {
    strict = await startCoffer({}, { webhookCa: receiver.ca });
  });
  afterAll(() => strict?.close());

  it.each(NON_PUBLIC_URLS)('refuses %s with 422 invalid_url', async (url) => {
    const project = await newProject(undefined, strict);
    expectError(
      await project.call('POST', '/webhooks', { body: { url, events: ['file.ready'] } }),
      422,
      'invalid_url',
    );
    const hook = await project.call('POST', '/webhooks', {
      body: { url: 'https://93.184.215.14/hook', events: ['file.ready'] },
    });
    expect(hook.status).toBe(201);
    expectError(
      await project.call('PUT', `/webhooks/${hook.body.id}`, { body: { url } }),
      422,
      'invalid_url',
    );
    expect((await project.call('GET', `/webhooks/${hook.body.id}`)).body.url).toBe(
      'https://93.184.215.14/hook',
    );
    expect((await project.call('DELETE', `/webhooks/${hook.body.id}`)).status).toBe(204);
  });

  it.each([
    ['a name that now resolves to loopback (DNS rebinding)', (port: number) => `https://localhost:${port}`],
    ['an address literal that got past registration', (port: number) => `https://127.0.0.1:${port}`],
  ])('refuses at connect time %s', async (_what, origin) => {
    const project = await newProject(undefined, strict);
    const endpoint = receiver.endpoint();
    const created = await project.call('POST', '/webhooks', {
      body: { url: 'https://93.184.215.14/hook', events: ['file.uploaded'] },
    });
    expect(created.status).toBe(201);
    // What registration checked no longer holds when the delivery connects.
    await strict.services.db.query('UPDATE webhooks SET url = $2 WHERE id = $1', [
      created.body.id,
      `${origin(receiver.port)}${endpoint.path}`,
    ]);
    await initiate(project);
    await step();
    const [failed] = (await project.call('GET', `/webhooks/${created.body.id}/deliveries`)).body.items;
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, last_response_status: null });
    expect(failed.last_error).toMatch(
      /^EBLOCKEDADDRESS: .*(is not a public|resolves to the non-public) address/,
    );
    expect(endpoint.requests).toHaveLength(0);
    expect((await project.call('DELETE', `/webhooks/${created.body.id}`)).status).toBe(204);

    async function step() {
      const d = strict.services.dispatcher;
      const deadline = Date.now() + 5000;
      while ((await d.runOnce()) === 0) {
        if (Date.now() > deadline) throw new Error('no delivery became due');
        await sleep(10);
      }
      await d.settle();
    }
  });
});
