import type { Logger } from 'pino';
import type { Db } from '../../infra/db.ts';
import { createJobRunner, type JobHandler } from '../../infra/jobs/index.ts';
import type { Metrics } from '../../infra/metrics.ts';
import { currentTraceparent, inSpan, type SpanAttributes, spansEnabled } from '../../infra/spans.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { createLimiter } from '../../lib/limiter.ts';
import {
  type AttemptRecord,
  type ClaimedDelivery,
  cancelClaimed,
  type DeliveryStatus,
  deliveriesQueue,
  markInterrupted,
  recordAttempts,
} from './delivery-repo.ts';
import { createSender, type Outcome } from './sender.ts';

const MAX_ATTEMPTS = 5;

/** What a delivery's client span says of its request: never the URL's path or query (they may hold a token). */
function requestAttributes(url: string): SpanAttributes {
  const { protocol, hostname, port } = new URL(url);
  const scheme = protocol.slice(0, -1);
  return {
    'http.request.method': 'POST',
    'url.scheme': scheme,
    'server.address': hostname,
    'server.port': Number(port) || (scheme === 'https' ? 443 : 80),
  };
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

/** An outcome waiting to be recorded, and the attempt waiting for it. */
interface PendingRecord {
  record: AttemptRecord;
  done: () => void;
  failed: (error: unknown) => void;
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
  const sender = createSender({
    allowPrivateNetworks: options.allowPrivateNetworks,
    timeoutMs: options.timeoutMs,
    ca: options.ca,
    connections: concurrency,
  });

  /** One attempt, as a client span of the delivery's job: its traceparent goes with the request. */
  const attempt = (delivery: ClaimedDelivery, lease: AbortSignal) =>
    inSpan(
      'POST',
      spansEnabled() ? requestAttributes(delivery.url) : {},
      () => {
        const traceparent = currentTraceparent();
        return sender.send(
          {
            url: delivery.url,
            body: delivery.body,
            signingSecret: delivery.signing_secret,
            headers: {
              'content-type': 'application/json',
              'user-agent': 'Coffer-Webhooks/1.0',
              'x-coffer-event': delivery.event,
              'x-coffer-event-id': delivery.event_id,
              'x-coffer-delivery-id': delivery.id,
              'x-coffer-delivery-attempt': String(delivery.attempts),
              ...(traceparent ? { traceparent } : {}),
            },
          },
          lease,
        );
      },
      { kind: 'client' },
    );

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
      await sender.close();
    },
  };
}

export type Dispatcher = ReturnType<typeof createDispatcher>;
