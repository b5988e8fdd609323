import type { Logger } from 'pino';
import type { Db } from '../db.ts';
import { inSpan, type SpanAttributes, spansEnabled } from '../spans.ts';
import { createHeartbeat } from './heartbeat.ts';
import { type Claimed, claim, LeaseLostError, type QueueTable, release } from './queue.ts';
import { nextRetryDelay, RETRY_FOREVER, type RetryPolicy } from './retry.ts';

export interface JobContext {
  /** Aborted when this worker lost the job's lease: stop, and write nothing. */
  readonly signal: AbortSignal;
}

/**
 * Runs the jobs of one kind. `run` settles its job itself, in the transaction that writes its
 * outcome (removes, reschedules or closes the row, fenced by the lease token); a job it leaves
 * unsettled comes back when its lease runs out. A `run` that throws is retried per `retry`.
 */
export interface JobHandler<J extends Claimed> {
  run(job: J, context: JobContext): Promise<void>;
  /** Default: retried for as long as it fails, with exponential backoff up to 10 minutes. */
  retry?: RetryPolicy;
  /** Settles a job that kept failing for its whole retry window (e.g. fails its file, closed). */
  giveUp?(job: J, error: Error): Promise<void>;
  /** Settles a job claimed once its attempts were spent (its last attempt was interrupted). */
  exhausted?(job: J): Promise<void>;
  /** Fields naming what the job is about, for log lines. */
  describe?(job: J): Record<string, unknown>;
}

export type JobHandlers<J extends Claimed> = Partial<Record<J['kind'], JobHandler<J>>>;

export interface JobRunnerOptions<J extends Claimed> {
  db: Db;
  queue: QueueTable<J>;
  /** One per kind this runner claims; kinds without a handler are left to other runners. */
  handlers: JobHandlers<J>;
  /** Jobs running at once in this process. */
  concurrency: number;
  /** Lease of a claim, renewed every third of it while the job runs. */
  leaseSeconds: number;
  logger: Logger;
  /** Runs before the first claim (again on the next run while it fails). */
  setup?(db: Db): Promise<void>;
}

/** A job's log fields (ids of what it is about) as span attributes. */
function spanFields(fields: Record<string, unknown> = {}): SpanAttributes {
  const out: SpanAttributes = {};
  for (const [key, value] of Object.entries(fields))
    if (typeof value === 'string') out[`coffer.${key}`] = value;
  return out;
}

const asError = (error: unknown) => (error instanceof Error ? error : new Error(String(error)));

/**
 * Claims jobs of a queue into free slots and runs each with its kind's handler, keeping its lease
 * by heartbeat, retrying failures with backoff, and giving up (through the handler) after the
 * retry window. Any number of runners, in any number of processes, may serve the same queue.
 */
export function createJobRunner<J extends Claimed>(options: JobRunnerOptions<J>) {
  const { db, queue, handlers, concurrency, leaseSeconds, logger } = options;
  const kinds = Object.keys(handlers);
  const heartbeat = createHeartbeat({ db, queue, leaseSeconds, logger });
  const inflight = new Set<Promise<void>>();
  let setUp = options.setup === undefined;
  let closed = false;

  const handlerOf = (job: J) => handlers[job.kind as J['kind']]!;
  const fields = (job: J, handler: JobHandler<J>) => ({
    queue: queue.name,
    job_id: job.id,
    kind: job.kind,
    attempt: job.attempts,
    ...handler.describe?.(job),
  });

  /** After a failed run: tried again after its backoff, or given up once failing for its whole window. */
  async function recover(job: J, handler: JobHandler<J>, error: Error, ranSeconds: number): Promise<void> {
    const policy = handler.retry ?? RETRY_FOREVER;
    const failingSeconds = job.failing_seconds === null ? 0 : job.failing_seconds + ranSeconds;
    const delay = nextRetryDelay(policy, job.attempts, failingSeconds);
    if (delay === undefined && handler.giveUp) {
      logger.error(
        { ...fields(job, handler), err: error },
        'job failed for its whole retry window; giving up',
      );
      await handler.giveUp(job, error);
      return;
    }
    const seconds = delay ?? policy.backoffSeconds(job.attempts);
    logger.warn({ ...fields(job, handler), err: error, retry_in_s: seconds }, 'job failed; will retry');
    await release(db, queue, job, seconds, error.message);
  }

  async function execute(job: J): Promise<void> {
    const handler = handlerOf(job);
    const lease = heartbeat.hold(job, Date.now());
    const started = performance.now();
    let failure: Error | undefined;
    const run = () => handler.run(job, { signal: lease.signal });
    try {
      // Continues the trace of what queued the job (the upload's request, the scan that made the
      // event); without tracing, no span attributes are built for each job.
      await (spansEnabled()
        ? inSpan(
            `${queue.name} ${job.kind}`,
            {
              'coffer.queue': queue.name,
              'coffer.job.kind': job.kind,
              'coffer.job.id': job.id,
              'coffer.job.attempt': job.attempts,
              ...spanFields(handler.describe?.(job)),
            },
            run,
            { parent: job.traceparent, kind: 'consumer' },
          )
        : run());
    } catch (error) {
      failure = asError(error);
    } finally {
      lease.drop();
    }
    if (!failure) return;
    if (lease.signal.aborted || failure instanceof LeaseLostError) {
      logger.warn(fields(job, handler), 'job left to the worker that holds its lease now');
      return;
    }
    await recover(job, handler, failure, (performance.now() - started) / 1000);
  }

  async function settleExhausted(job: J): Promise<void> {
    const handler = handlerOf(job);
    logger.warn(fields(job, handler), 'job claimed after its last attempt was interrupted; not run again');
    try {
      await handler.exhausted?.(job);
    } catch (error) {
      logger.error(
        { ...fields(job, handler), err: error },
        'exhausted job not settled; it returns after its lease',
      );
    }
  }

  return {
    /**
     * Claims as many due jobs as there are free slots (when all are busy, waiting for a quarter of
     * them to free) and starts them; returns how many it started.
     */
    async runOnce(): Promise<number> {
      if (closed) return 0;
      if (!setUp) {
        await options.setup!(db);
        setUp = true;
      }
      // While every slot is busy, claims wait for a quarter of them to free: one claim per job
      // freed would cost a claim statement per job under a backlog.
      const refill = Math.ceil(concurrency / 4);
      while (inflight.size > 0 && concurrency - inflight.size < refill) await Promise.race(inflight);
      if (closed) return 0; // closing while it waited: claims nothing more
      const jobs = await claim(db, queue, { kinds, limit: concurrency - inflight.size, leaseSeconds });
      let started = 0;
      for (const job of jobs) {
        if (job.exhausted) continue;
        started++;
        const task = execute(job)
          .catch((error: unknown) =>
            logger.error(
              { err: error, queue: queue.name, job_id: job.id },
              'job outcome not recorded; the job returns after its lease',
            ),
          )
          .finally(() => inflight.delete(task));
        inflight.add(task);
      }
      for (const job of jobs) if (job.exhausted) await settleExhausted(job);
      return started;
    },

    /** Waits for the jobs in flight (tests, shutdown). */
    async settle(): Promise<void> {
      while (inflight.size > 0) await Promise.all(inflight);
    },

    /** Claims nothing more and waits for the jobs in flight, their leases kept until they finish. */
    async close(): Promise<void> {
      closed = true;
      while (inflight.size > 0) await Promise.all(inflight);
    },
  };
}

export type JobRunner = ReturnType<typeof createJobRunner>;
