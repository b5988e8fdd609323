import type { Logger } from 'pino';
import type { Db } from '../db.ts';
import { type Claimed, LeaseLostError, type QueueTable } from './queue.ts';
import { createJobRunner, type JobHandler } from './runner.ts';

/** Work that recurs, run by one worker of the whole deployment at a time. */
export interface PeriodicTask {
  /** The task's row in periodic_tasks. */
  name: string;
  /** Seconds from the end of one run to the start of the next; also the delay after a failed run. */
  everySeconds: number;
  /** One pass; true when it found work (the next pass starts at once, as a backlog may remain). */
  run(signal: AbortSignal): Promise<boolean>;
}

export const PERIODIC_TASKS: QueueTable<Claimed> = {
  name: 'periodic',
  table: 'periodic_tasks',
  due: 'run_at',
  kind: 'c.id',
};

/**
 * Runs `tasks` through the jobs module: each is a row of periodic_tasks, claimed and leased like any
 * job (a worker that dies mid-run leaves it to another after one lease) and rescheduled after each
 * run, so that the deployment runs each task once per interval however many workers it has.
 */
export function createPeriodicRunner(deps: {
  db: Db;
  tasks: PeriodicTask[];
  leaseSeconds: number;
  logger: Logger;
}) {
  const { db, tasks } = deps;

  /** The task's next run in `seconds`, its failures forgotten; only while this worker holds it. */
  async function reschedule(job: Claimed, seconds: number): Promise<void> {
    const rows = await db.query(
      `UPDATE periodic_tasks SET run_at = now() + make_interval(secs => $3), lease_token = NULL, attempts = 0,
         last_error = NULL, failing_since = NULL
       WHERE id = $1 AND lease_token = $2 RETURNING id`,
      [job.id, job.lease_token, seconds],
    );
    if (rows.length === 0) throw new LeaseLostError(`periodic task ${job.id}: the lease was lost`);
  }

  const handlers: Record<string, JobHandler<Claimed>> = {};
  for (const task of tasks) {
    handlers[task.name] = {
      async run(job, { signal }) {
        const busy = await task.run(signal);
        await reschedule(job, busy ? 0 : task.everySeconds);
      },
      retry: { backoffSeconds: () => task.everySeconds, windowSeconds: Infinity },
    };
  }

  return createJobRunner({
    db,
    leaseSeconds: deps.leaseSeconds,
    logger: deps.logger,
    queue: PERIODIC_TASKS,
    handlers,
    concurrency: tasks.length,
    // Every task has its row, and runs once when a worker starts (it may follow a crash), unless
    // another worker is running it: from then on every interval.
    async setup() {
      await db.query(
        `INSERT INTO periodic_tasks (id, run_at) SELECT t.id, now() FROM unnest($1::text[]) AS t (id)
         ON CONFLICT (id) DO UPDATE SET run_at = now()
         WHERE periodic_tasks.lease_token IS NULL OR periodic_tasks.run_at <= now()`,
        [tasks.map((task) => task.name)],
      );
    },
  });
}
