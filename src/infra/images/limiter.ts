import { ImageError } from './errors.ts';

/**
 * Runs at most `concurrency` tasks at once and keeps at most `maxQueued` waiting; past that a task is
 * refused at once (ImageError Busy) instead of piling up memory and latency.
 */
export function createLimiter(concurrency: number, maxQueued: number) {
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
        if (waiting.length >= maxQueued) {
          throw new ImageError('Busy', 'Every render slot is taken: try again shortly', {
            concurrency,
            queued: waiting.length,
          });
        }
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
