import type { Logger } from 'pino';
import { request, type Dispatcher as UndiciDispatcher } from 'undici';
import type { Db } from '../../infra/db.ts';
import { createSafeAgent } from '../../infra/http/safe-agent.ts';
import { hmacHex } from '../../lib/secrets.ts';

/** A failed endpoint's answer is read only this far, to show why it failed. */
const RESPONSE_SNIPPET_BYTES = 1024;
const MAX_ATTEMPTS = 5;

interface Claimed {
  id: string;
  event_id: string;
  event: string;
  payload: unknown;
  attempts: number;
  url: string;
  signing_secret: string;
  live: boolean;
}

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
  /** Deliveries in flight at once in this process: a slow endpoint holds one slot, not the others. */
  concurrency?: number;
  /** Extra trusted CA certificates (PEM) for receivers. */
  ca?: string;
}

type Body = UndiciDispatcher.ResponseData['body'];

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
 * schedule until delivered or dead. Claims are leased with FOR UPDATE SKIP LOCKED, so several
 * workers never send the same attempt, and a worker killed mid-attempt leaves the delivery due again.
 */
export function createDispatcher(deps: { db: Db; logger: Logger; options: DispatcherOptions }) {
  const { db, logger, options } = deps;
  const concurrency = options.concurrency ?? 64;
  const leaseSeconds = options.timeoutMs / 1000 + 30;
  const agent = createSafeAgent({
    allowPrivateNetworks: options.allowPrivateNetworks,
    timeoutMs: options.timeoutMs,
    ca: options.ca,
    connections: concurrency,
  });
  const inflight = new Set<Promise<void>>();

  /**
   * Claims due deliveries, counting their attempt. One whose last attempt's lease ran out (its
   * worker stopped before recording the outcome) has had all its attempts: it is marked dead in
   * the same statement instead of being sent a sixth time, and not returned.
   */
  async function claim(limit: number): Promise<Claimed[]> {
    const rows = await db.tx((q) =>
      q.query<Claimed & { exhausted: boolean }>(
        `UPDATE deliveries d SET
           attempts = CASE WHEN d.attempts >= $4 THEN d.attempts ELSE d.attempts + 1 END,
           status = CASE WHEN d.attempts >= $4 THEN 'dead' ELSE d.status END,
           last_error = CASE WHEN d.attempts >= $4
             THEN 'the last attempt was interrupted before its outcome was recorded' ELSE d.last_error END,
           next_attempt_at = now() + make_interval(secs => $2), updated_at = now()
         FROM webhooks w
         WHERE w.id = d.webhook_id AND d.id IN (
           SELECT id FROM deliveries
           WHERE status = 'pending' AND next_attempt_at <= now()
             AND (attempts > 0 OR created_at <= now() - make_interval(secs => $3))
           ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING d.id, d.event_id, d.event, d.payload, d.attempts, w.url, w.signing_secret,
           (w.is_active AND w.deleted_at IS NULL) AS live, d.status = 'dead' AS exhausted`,
        [limit, leaseSeconds, options.retrySchedule[0] ?? 0, MAX_ATTEMPTS],
      ),
    );
    return rows.filter((row) => !row.exhausted);
  }

  async function attempt(delivery: Claimed): Promise<Outcome> {
    const body = JSON.stringify(delivery.payload);
    try {
      const response = await request(delivery.url, {
        method: 'POST',
        body,
        dispatcher: agent,
        signal: AbortSignal.timeout(options.timeoutMs),
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
    }
  }

  // Outcomes are written in batches: one UPDATE for every delivery that finished in the same tick.
  let batch: { row: unknown[]; done: () => void; failed: (error: unknown) => void }[] = [];

  async function flush(): Promise<void> {
    const rows = batch;
    batch = [];
    const column = (index: number) => rows.map((entry) => entry.row[index]);
    try {
      // Only while still pending: a delivery cancelled meanwhile (webhook deleted) stays cancelled.
      await db.query(
        `UPDATE deliveries d SET status = o.status, next_attempt_at = now() + make_interval(secs => o.delay),
           last_response_status = o.code, last_error = o.error, updated_at = now()
         FROM unnest($1::text[], $2::text[], $3::float8[], $4::int4[], $5::text[]) AS o (id, status, delay, code, error)
         WHERE d.id = o.id AND d.status = 'pending'`,
        [column(0), column(1), column(2), column(3), column(4)],
      );
      for (const entry of rows) entry.done();
    } catch (error) {
      for (const entry of rows) entry.failed(error);
    }
  }

  async function record(delivery: Claimed, outcome: Outcome): Promise<void> {
    const finalFailure = !outcome.ok && delivery.attempts >= MAX_ATTEMPTS;
    const status = outcome.ok ? 'delivered' : finalFailure ? 'dead' : 'pending';
    const delay = outcome.ok || finalFailure ? 0 : (options.retrySchedule[delivery.attempts] ?? 0);
    if (!outcome.ok) {
      logger.warn(
        { delivery_id: delivery.id, attempt: delivery.attempts, status, error: outcome.error },
        'webhook delivery failed',
      );
    }
    const row = [delivery.id, status, delay, outcome.status, outcome.error?.slice(0, 2000) ?? null];
    await new Promise<void>((done, failed) => {
      if (batch.length === 0) setImmediate(() => void flush());
      batch.push({ row, done, failed });
    });
  }

  async function deliver(delivery: Claimed): Promise<void> {
    if (!delivery.live) {
      // Claimed but not sent (webhook deactivated or deleted): the claim's count is given back.
      await db.query(
        `UPDATE deliveries SET status = 'cancelled', attempts = $2, updated_at = now()
         WHERE id = $1 AND status = 'pending'`,
        [delivery.id, delivery.attempts - 1],
      );
      return;
    }
    await record(delivery, await attempt(delivery));
  }

  return {
    /** Claims as many due deliveries as there are free slots (waiting for one if none) and starts them; returns how many. */
    async runOnce(): Promise<number> {
      // All slots busy: wait for one to free up rather than for the next interval.
      while (inflight.size >= concurrency) await Promise.race(inflight);
      const claimed = await claim(concurrency - inflight.size);
      for (const delivery of claimed) {
        const task = deliver(delivery)
          .catch((error: unknown) =>
            logger.error({ err: error, delivery_id: delivery.id }, 'webhook delivery crashed'),
          )
          .finally(() => inflight.delete(task));
        inflight.add(task);
      }
      return claimed.length;
    },

    /** Waits for the deliveries in flight (tests, shutdown). */
    async settle(): Promise<void> {
      await Promise.all(inflight);
    },

    async close(): Promise<void> {
      await Promise.all(inflight);
      await agent.close();
    },
  };
}

export type Dispatcher = ReturnType<typeof createDispatcher>;
