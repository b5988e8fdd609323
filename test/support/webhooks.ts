import { createHmac } from 'node:crypto';
import pino from 'pino';
import { afterEach, beforeAll, expect } from 'vitest';
import type { Db } from '../../src/infra/db.ts';
import {
  createDispatcher,
  type Dispatcher,
  type DispatcherOptions,
} from '../../src/modules/webhooks/dispatcher.ts';
import { madeBeforeAll, type Reply, startCoffer, type TestCoffer, type TestProject } from './coffer.ts';
import { sleep } from './processes.ts';
import { type Endpoint, type Received, type Receiver, startReceiver } from './receiver.ts';

export const EVENTS = ['file.uploaded', 'file.ready', 'file.failed', 'file.quarantined', 'file.deleted'];
/** Private networks allowed (the receiver is on loopback), short retry schedule and timeout. */
export const ENV = {
  COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  COFFER_WEBHOOK_RETRY_SCHEDULE: '0,0.2,0.2,0.2,0.2',
  COFFER_WEBHOOK_TIMEOUT_MS: '500',
};

export const quiet = pino({ level: 'silent' });

export function expectError(reply: Reply, status: number, code: string) {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body.error.code).toBe(code);
  expect(reply.body.error.message).toEqual(expect.any(String));
  expect(reply.body.error.request_id).toEqual(expect.any(String));
}

/** Registers a webhook for `endpoint` (201 expected) and gives the endpoint its secret. */
export async function register(
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

export async function deliveriesOf(project: TestProject, webhookId: string, status?: string): Promise<any[]> {
  const reply = await project.call(
    'GET',
    `/webhooks/${webhookId}/deliveries${status ? `?status=${status}` : ''}`,
  );
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  expect(reply.body.total).toBe(reply.body.items.length);
  return reply.body.items;
}

const hmac = (secret: string, raw: Buffer) => createHmac('sha256', secret).update(raw).digest('hex');

/** The checks every delivery request must pass. */
export function expectSigned(request: Received, secret: string, event: string) {
  expect(request.method).toBe('POST');
  expect(request.headers['content-type']).toBe('application/json');
  expect(request.headers['x-coffer-signature']).toBe(hmac(secret, request.raw));
  expect(request.signatureValid).toBe(true);
  expect(request.headers['x-coffer-event']).toBe(event);
  expect(request.headers['x-coffer-event-id']).toMatch(/^evt_[0-9A-Z]{26}$/);
  expect(request.json.event).toBe(event);
}

/**
 * The helpers of a suite that delivers webhooks from `coffer` to `receiver`: both started in the
 * suite's `beforeAll`, read when a helper runs.
 */
export function webhooksOf(suite: () => { coffer: TestCoffer; receiver: Receiver }) {
  /** Every project the suite creates: their pending deliveries are cancelled after each test. */
  const projects: TestProject[] = [];

  async function newProject(
    settings?: Parameters<TestCoffer['newProject']>[0],
    on: TestCoffer = suite().coffer,
  ): Promise<TestProject> {
    const project = await on.newProject(settings);
    projects.push(project);
    return project;
  }

  /** Lets the dispatcher's work end and cancels what is pending: for the suite's `afterEach`. */
  async function leaveNothingPending() {
    const { coffer } = suite();
    await coffer.services.dispatcher.settle();
    await coffer.services.db.query(
      "UPDATE deliveries SET status = 'cancelled' WHERE status = 'pending' AND project_id = ANY ($1::text[])",
      [projects.map((p) => p.id)],
    );
  }

  /** A dispatcher of the test's own, with a deadline no endpoint here comes near unless it hangs. */
  const ownDispatcher = (options: Partial<DispatcherOptions> = {}, db: Db = suite().coffer.services.db) =>
    createDispatcher({
      db,
      logger: quiet,
      options: {
        retrySchedule: [0, 0.2, 0.2, 0.2, 0.2],
        timeoutMs: 10_000,
        allowPrivateNetworks: true,
        ca: suite().receiver.ca,
        ...options,
      },
    });

  /** Runs the dispatcher (and waits for what it started) until `done` holds. */
  async function pump(done: () => boolean | Promise<boolean>, timeoutMs = 5000, dispatcher?: Dispatcher) {
    const d = dispatcher ?? suite().coffer.services.dispatcher;
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
  async function runFor(ms: number, dispatcher: Dispatcher = suite().coffer.services.dispatcher) {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      await dispatcher.runOnce();
      await dispatcher.settle();
      await sleep(20);
    }
  }

  return { newProject, leaveNothingPending, ownDispatcher, pump, runFor };
}

/**
 * A receiver and a Coffer with `ENV` delivering to it, for the tests of the file this is called in
 * (started in its `beforeAll`, closed in its `afterAll`), and the helpers of its webhooks; after each
 * test, what it left pending is cancelled, so that no test leaves work for the next one's dispatcher.
 */
export function webhooksSuite() {
  const receiver = madeBeforeAll(startReceiver, (made) => made.close());
  const coffer = madeBeforeAll(
    () => startCoffer(ENV, { webhookCa: receiver.ca }),
    (made) => made.close(),
  );
  const helpers = webhooksOf(() => ({ coffer, receiver }));
  // The test files a worker ran before share its database: deliveries they left pending would be
  // claimed by this file's dispatcher in place of its own (a step that sends exactly one attempt).
  beforeAll(async () => {
    await coffer.services.db.query("UPDATE deliveries SET status = 'cancelled' WHERE status = 'pending'");
  });
  afterEach(helpers.leaveNothingPending);
  return { coffer, receiver, ...helpers };
}
