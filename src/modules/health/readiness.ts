import type { Cache } from '../../infra/cache.ts';
import type { Db } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';

/** A probe answers within about 2 s even when a dependency hangs. */
const CHECK_TIMEOUT_MS = 1500;

export type CheckState = 'ok' | 'unavailable';

export interface ReadinessChecks {
  database: CheckState;
  cache: CheckState;
  store: CheckState;
}

async function check(probe: () => Promise<void>): Promise<CheckState> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([probe(), deadline]);
    return 'ok';
  } catch {
    return 'unavailable';
  } finally {
    clearTimeout(timer);
  }
}

/** Whether each dependency answers: what GET /health/ready reports, and the readiness metric. */
export async function checkReadiness(db: Db, cache: Cache, store: ObjectStore): Promise<ReadinessChecks> {
  const [database, cacheState, storeState] = await Promise.all([
    check(() => db.ping(CHECK_TIMEOUT_MS)),
    check(() => cache.ping(CHECK_TIMEOUT_MS)),
    check(() => store.check()),
  ]);
  return { database, cache: cacheState, store: storeState };
}
