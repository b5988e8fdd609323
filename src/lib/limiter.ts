/**
 * Runs at most `concurrency` tasks at once; the others wait their turn, in order. With `refuse`, at
 * most `refuse.maxQueued` wait, and past that a task is refused at once (with `refuse.error`)
 * instead of piling up memory and latency.
 */
export function createLimiter(
  concurrency: number,
  refuse?: { maxQueued: number; error: (queued: number) => Error },
) {
  let running = 0;
  const waiting: (() => void)[] = [];

  const release = () => {
    running--;
    const next = waiting.shift();
    if (next) {
      running++;
      next();
    }
  };

  return {
    async run<T>(task: () => Promise<T>): Promise<T> {
      if (running >= concurrency) {
        if (refuse && waiting.length >= refuse.maxQueued) throw refuse.error(waiting.length);
        await new Promise<void>((resolve) => waiting.push(resolve));
      } else running++;
      try {
        return await task();
      } finally {
        release();
      }
    },
    /** Tasks running and waiting (metrics, tests). */
    get load() {
      return { running, queued: waiting.length };
    },
  };
}

export type Limiter = ReturnType<typeof createLimiter>;
