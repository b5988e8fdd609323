import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/infra/db.ts';
import {
  claim,
  createPeriodicRunner,
  nextRetryDelay,
  PERIODIC_TASKS,
  type PeriodicTask,
  queueDepth,
} from '../../src/infra/jobs/index.ts';
import { secondDb, testDb } from '../support/backends.ts';
import { sleep } from '../support/processes.ts';

const logger = pino({ level: 'silent' });

let db: Db;
let other: Db;
beforeAll(async () => {
  db = await testDb();
  other = await secondDb();
});
afterAll(async () => {
  if (other !== db) await other.close();
});

/** A task of its own name, counting its runs; `busy` runs report work left. */
function countingTask(everySeconds: number, busyRuns = 0): PeriodicTask & { runs: number } {
  return {
    name: `test-${randomUUID()}`,
    everySeconds,
    runs: 0,
    async run() {
      this.runs++;
      return this.runs <= busyRuns;
    },
  };
}

const rowOf = async (name: string) =>
  (
    await db.query<{ due: boolean; attempts: number; lease_token: string | null }>(
      'SELECT run_at <= now() AS due, attempts, lease_token FROM periodic_tasks WHERE id = $1',
      [name],
    )
  )[0];

describe('periodic tasks', () => {
  it('run once when a worker starts, then on one worker of the deployment per interval', async () => {
    const task = countingTask(3600);
    const runners = [db, other, db].map((on) =>
      createPeriodicRunner({ db: on, tasks: [task], leaseSeconds: 30, logger }),
    );
    const poll = async (rounds: number) => {
      for (let round = 0; round < rounds; round++) {
        await Promise.all(runners.map((runner) => runner.runOnce()));
        await Promise.all(runners.map((runner) => runner.settle()));
      }
    };
    for (const runner of runners) {
      await runner.runOnce();
      await runner.settle();
    }
    expect(task.runs).toBe(3);
    expect(await rowOf(task.name)).toEqual({ due: false, attempts: 0, lease_token: null });
    const [depth] = (await queueDepth(db, PERIODIC_TASKS)).filter((row) => row.kind === task.name);
    expect(depth).toMatchObject({ due: 0, running: 0, scheduled: 1, oldest_due_seconds: null });

    await poll(3);
    expect(task.runs).toBe(3);
    // Its interval has passed: one of the three runs it.
    await db.query('UPDATE periodic_tasks SET run_at = now() WHERE id = $1', [task.name]);
    await poll(3);
    expect(task.runs).toBe(4);
  });

  it('run again at once while they find work', async () => {
    const task = countingTask(3600, 2);
    const runner = createPeriodicRunner({ db, tasks: [task], leaseSeconds: 30, logger });
    while ((await runner.runOnce()) > 0) await runner.settle();
    expect(task.runs).toBe(3);
  });

  it('are taken over once the lease of a worker that died runs out', async () => {
    const task = countingTask(3600);
    const starting = createPeriodicRunner({ db, tasks: [task], leaseSeconds: 1, logger });
    // A worker starts (the row is due at once), claims the task and dies with it.
    await starting.runOnce();
    await starting.settle();
    expect(task.runs).toBe(1);
    await db.query('UPDATE periodic_tasks SET run_at = now() WHERE id = $1', [task.name]);
    const [dead] = await claim(other, PERIODIC_TASKS, { kinds: [task.name], limit: 1, leaseSeconds: 1 });
    expect(dead).toMatchObject({ id: task.name, kind: task.name, attempts: 1 });

    const survivor = createPeriodicRunner({ db, tasks: [task], leaseSeconds: 1, logger });
    const deadline = Date.now() + 15_000;
    while (task.runs < 2 && Date.now() < deadline) {
      await survivor.runOnce();
      await survivor.settle();
      await sleep(100);
    }
    expect(task.runs).toBe(2);
    expect(await rowOf(task.name)).toEqual({ due: false, attempts: 0, lease_token: null });
  });

  it('are retried after their interval when a run fails', async () => {
    const name = `test-${randomUUID()}`;
    const runner = createPeriodicRunner({
      db,
      tasks: [{ name, everySeconds: 600, run: () => Promise.reject(new Error('store unavailable')) }],
      leaseSeconds: 30,
      logger,
    });
    expect(await runner.runOnce()).toBe(1);
    await runner.settle();
    const [row] = await db.query<{ wait: number; last_error: string; failing: boolean }>(
      `SELECT extract(epoch FROM run_at - now())::float8 AS wait, last_error, failing_since IS NOT NULL AS failing
       FROM periodic_tasks WHERE id = $1`,
      [name],
    );
    expect(row).toMatchObject({ last_error: 'store unavailable', failing: true });
    expect(row!.wait).toBeGreaterThan(500);
  });
});

describe('retry delays', () => {
  const policy = { backoffSeconds: (attempt: number) => 5 * 2 ** (attempt - 1), windowSeconds: 60 };

  it('back off, cut the last delay to the end of the window, and end with it', () => {
    expect(nextRetryDelay(policy, 1, 0)).toBe(5);
    expect(nextRetryDelay(policy, 3, 20)).toBe(20);
    expect(nextRetryDelay(policy, 4, 50)).toBe(10);
    expect(nextRetryDelay(policy, 5, 60)).toBeUndefined();
    expect(nextRetryDelay({ ...policy, windowSeconds: 0 }, 1, 0)).toBeUndefined();
    expect(nextRetryDelay({ ...policy, windowSeconds: Number.POSITIVE_INFINITY }, 20, 1e9)).toBe(5 * 2 ** 19);
  });
});
