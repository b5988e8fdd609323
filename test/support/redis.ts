import type { Cache } from '../../src/infra/cache.ts';
import { sleep } from './processes.ts';

/** Resolves once `cache` answers a ping, polling for up to `ms` (commands are refused until it connects). */
export async function answering(cache: Cache, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await cache.ping(500);
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(100);
    }
  }
}
