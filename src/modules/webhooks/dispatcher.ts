import type { Logger } from 'pino';
import { request, type Dispatcher as UndiciDispatcher } from 'undici';
import type { Db } from '../../infra/db.ts';
import { createSafeAgent } from '../../infra/http/safe-agent.ts';
import { createJobRunner, type JobHandler } from '../../infra/jobs/index.ts';
import type { Metrics } from '../../infra/metrics.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { createLimiter } from '../../lib/limiter.ts';
import { hmacHex } from '../../lib/secrets.ts';
import {
  type AttemptRecord,
  type ClaimedDelivery,
  cancelClaimed,
  type DeliveryStatus,
  deliveriesQueue,
  markInterrupted,
  recordAttempts,
} from './delivery-repo.ts';

/** A failed endpoint's answer is read only this far, to show why it failed. */
const RESPONSE_SNIPPET_BYTES = 1024;
const MAX_ATTEMPTS = 5;

interface Outcome {
  ok: boolean;
  status: number | null;
  error: string | null;
}

export interface DispatcherOptions {
  /** Seconds before attempt 1 (after the event) and before attempts 2..5 (after a failure). */
  retrySchedule: number[];
  timeoutMs: number;
  allowPrivateNetworks: boolean;
  /** Requests in flight at once in this process: a slow endpoint holds one slot, not the others. */
  concurrency?: number;
  /** Extra trusted CA certificates (PEM) for receivers. */
  ca?: string;
  /** Lease of a claimed delivery, renewed while its attempt runs (default 30 s). */
  leaseSeconds?: number;
}

type Body = UndiciDispatcher.ResponseData['body'];

/** An outcome waiting to be recorded, and the attempt waiting for it. */
interface PendingRecord {
  record: AttemptRecord;
  done: () => void;
  failed: (error: unknown) => void;
}

/**
 * Drops a response body: a short one is read to its end, so the connection stays reusable; a
 * longer one is cut. undici's body emits 'error' when destroyed before its end: without a
 * listener that is an uncaught exception, which would end the process.
 */
async function discard(body: Body): Promise<void> {
  body.on('error', () => {});
  await body.dump({ limit: RESPONSE_SNIPPET_BYTES }).catch(() => body.destroy());
}

async function readSnippet(body: Body): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk);
      length += chunk.length;
      if (length >= RESPONSE_SNIPPET_BYTES) break;
    }
  } finally {
    await discard(body);
  }
  return Buffer.concat(chunks).subarray(0, RESPONSE_SNIPPET_BYTES).toString('utf8');
}

/**
 * Sends pending deliveries: signed POSTs of the event envelope, retried on the configured
 * schedule until delivered or dead. Deliveries are claimed through the jobs module (FOR UPDATE
 * SKIP LOCKED, a lease renewed while the attempt runs), so several workers never send the same
 * attempt, and a worker killed mid-attempt leaves the delivery due again within one lease.
 */
export function createDispatcher(deps: {
  db: Db;
  logger: Logger;
  metrics?: Metrics;
  options: DispatcherOptions;
}) {
  const { db, logger, metrics, options } = deps;
  const concurrency = options.concurrency ?? 64;
  // The runner holds twice as many deliveries as are sent at once: those claimed wait for a request
  // slot, and those sent wait for their outcome's statement, without a request slot idling meanwhile
  // (a claim or an outcome's statement takes a round trip to the database, more than many requests).
  const sends = createLimiter(concurrency);
  const agent = createSafeAgent({
    allowPrivateNetworks: options.allowPrivateNetworks,
    timeoutMs: options.timeoutMs,
    ca: options.ca,
    connections: concurrency,
  });

  async function attempt(delivery: ClaimedDelivery, lease: AbortSignal): Promise<Outcome> {
    const { body } = delivery;
    // One controller per attempt, aborted at its deadline or when its lease is lost: a plain timer
    // costs less than AbortSignal.any over AbortSignal.timeout, paid on every delivery.
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new DOMException('the attempt timed out', 'TimeoutError')),
      options.timeoutMs,
    );
    const leaseLost = () => controller.abort(lease.reason);
    lease.addEventListener('abort', leaseLost, { once: true });
    try {
      const response = await request(delivery.url, {
        method: 'POST',
        body,
        dispatcher: agent,
        signal: controller.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Coffer-Webhooks/1.0',
          'x-coffer-signature': hmacHex(delivery.signing_secret, body),
          'x-coffer-event': delivery.event,
          'x-coffer-event-id': delivery.event_id,
          'x-coffer-delivery-id': delivery.id,
          'x-coffer-delivery-attempt': String(delivery.attempts),
        },
      });
      const { statusCode } = response;
      if (statusCode >= 200 && statusCode < 300) {
        await discard(response.body);
        return { ok: true, status: statusCode, error: null };
      }
      if (statusCode >= 300 && statusCode < 400) {
        await discard(response.body);
        const location = response.headers.location ?? 'elsewhere';
        return { ok: false, status: statusCode, error: `redirect to ${location} is not followed` };
      }
      const snippet = await readSnippet(response.body);
      return { ok: false, status: statusCode, error: `HTTP ${statusCode}${snippet ? `: ${snippet}` : ''}` };
    } catch (error) {
      const err = error as Error & { code?: unknown };
      // Node's errors carry a string code (ECONNREFUSED, UND_ERR_…); a DOMException (the
      // AbortSignal timeout) a legacy number, which says nothing: its name is used instead.
      const code = typeof err.code === 'string' ? err.code : err.name;
      const reason = err.name === 'TimeoutError' || code.includes('TIMEOUT') ? 'timed out' : err.message;
      return { ok: false, status: null, error: `${code}: ${reason}` };
    } finally {
      clearTimeout(timer);
      lease.removeEventListener('abort', leaseLost);
    }
  }

  // Outcomes are recorded in batches, one statement at a time: the outcomes that come in while one
  // is being written wait for it and go together in the next, so under load a statement records
  // many deliveries, and when idle an outcome waits for no one.
  let waiting: PendingRecord[] = [];
  let writing = false;

  async function writeOutcomes(): Promise<void> {
    while (waiting.length > 0) {
      const entries = waiting;
      waiting = [];
      try {
        const recorded = await recordAttempts(
          db,
          entries.map((entry) => entry.record),
        );
        countOutcomes(recorded.values());
        for (const entry of entries) entry.done();
      } catch (error) {
        for (const entry of entries) entry.failed(error);
      }
    }
    writing = false;
  }

  /** Counts recorded outcomes by status, one increment per status rather than per delivery. */
  function countOutcomes(statuses: Iterable<DeliveryStatus>): void {
    if (!metrics) return;
    const counts = new Map<DeliveryStatus, number>();
    for (const status of statuses) counts.set(status, (counts.get(status) ?? 0) + 1);
    for (const [status, count] of counts)
      metrics.webhookDeliveries.inc({ outcome: status === 'pending' ? 'retry' : status }, count);
  }

  function record(delivery: ClaimedDelivery, outcome: Outcome): Promise<void> {
    const finalFailure = !outcome.ok && delivery.attempts >= MAX_ATTEMPTS;
    const status = outcome.ok ? 'delivered' : finalFailure ? 'dead' : 'pending';
    const delay = outcome.ok || finalFailure ? 0 : (options.retrySchedule[delivery.attempts] ?? 0);
    if (!outcome.ok) {
      logger.warn(
        { delivery_id: delivery.id, attempt: delivery.attempts, status, error: outcome.error },
        'webhook delivery failed',
      );
    }
    const record: AttemptRecord = {
      lease: delivery,
      status,
      delaySeconds: delay,
      responseStatus: outcome.status,
      error: outcome.error?.slice(0, 2000) ?? null,
    };
    return new Promise<void>((done, failed) => {
      waiting.push({ record, done, failed });
      if (writing) return;
      writing = true;
      // Once this turn of the event loop is over: the outcomes that came with it go in the same statement.
      setImmediate(() => void writeOutcomes());
    });
  }

  const deliver: JobHandler<ClaimedDelivery> = {
    describe: (delivery) => ({ delivery_id: delivery.id }),
    async run(delivery, { signal }) {
      if (!delivery.live) {
        // Claimed but not sent (webhook deactivated or deleted): the claim's count is given back.
        await cancelClaimed(db, delivery, delivery.attempts - 1);
        metrics?.webhookDeliveries.inc({ outcome: 'cancelled' });
        return;
      }
      const outcome = await sends.run(async () => {
        signal.throwIfAborted(); // lost while it waited for a slot: sent by its new holder
        return attempt(delivery, signal);
      });
      if (outcome.ok) failpoint('webhook.delivery.sent');
      // Lost meanwhile: the worker that holds the delivery now sends and records the next attempt.
      signal.throwIfAborted();
      await record(delivery, outcome);
    },
    // The worker of the last attempt stopped before recording it: dead, never sent a sixth time.
    async exhausted(delivery) {
      await markInterrupted(db, delivery);
      metrics?.webhookDeliveries.inc({ outcome: 'dead' });
    },
  };

  const runner = createJobRunner({
    db,
    // Seconds before a delivery's first attempt, counted from its event.
    queue: deliveriesQueue({ firstDelaySeconds: options.retrySchedule[0] ?? 0, maxAttempts: MAX_ATTEMPTS }),
    handlers: { deliver },
    concurrency: concurrency * 2,
    leaseSeconds: options.leaseSeconds ?? 30,
    logger,
  });

  return {
    /** Claims as many due deliveries as the runner has free slots (when all are busy, waiting for a quarter of them) and starts them; returns how many. */
    runOnce: () => runner.runOnce(),

    /** Waits for the deliveries in flight (tests, shutdown). */
    settle: () => runner.settle(),

    async close(): Promise<void> {
      await runner.close();
      await agent.close();
    },
  };
}

export type Dispatcher = ReturnType<typeof createDispatcher>;
