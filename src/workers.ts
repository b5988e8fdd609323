import type { Logger } from 'pino';

export interface Worker {
  name: string;
  /** Milliseconds between the end of one run and the start of the next. */
  intervalMs: number;
  /** One pass; true when it found work, so the next pass starts at once. */
  run(): Promise<unknown>;
  /** Finishes work the runs started in the background (e.g. deliveries in flight). */
  stop?(): Promise<void>;
}

/**
 * A job runner (see infra/jobs) as a worker: it claims into its free slots every `intervalMs`, at
 * once again while it finds work, and on stop waits for its jobs in flight.
 */
export function jobWorker(
  name: string,
  runner: { runOnce(): Promise<number>; close(): Promise<void> },
  intervalMs: number,
): Worker {
  return { name, intervalMs, run: async () => (await runner.runOnce()) > 0, stop: () => runner.close() };
}

/**
 * Runs each worker periodically until stopped, the first time one interval after the start: a
 * process that has just started answers its first requests (a readiness probe among them) before
 * the background catches up, which on the embedded database runs in the same thread. A run that
 * throws is logged and retried at the next interval; stop() waits for runs in progress, so shutdown
 * never cuts work in half.
 */
export function startWorkers(workers: Worker[], logger: Logger): { stop(): Promise<void> } {
  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  const running = new Set<Promise<unknown>>();

  const schedule = (worker: Worker, delay: number) => {
    if (stopped) return;
    const timer = setTimeout(async () => {
      timers.delete(timer);
      const run = worker.run().catch((error: unknown) => {
        logger.error({ err: error, worker: worker.name }, 'worker run failed');
        return false;
      });
      running.add(run);
      const busy = (await run) === true;
      running.delete(run);
      schedule(worker, busy ? 0 : worker.intervalMs);
    }, delay);
    timers.add(timer);
  };

  for (const worker of workers) schedule(worker, worker.intervalMs);
  return {
    async stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      await Promise.all(running);
      await Promise.all(workers.map((worker) => worker.stop?.()));
    },
  };
}
