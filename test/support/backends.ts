import { inject } from 'vitest';
import { type Cache, memoryCache, redisCache } from '../../src/infra/cache.ts';
import { type Db, openPglite, openPostgres } from '../../src/infra/db.ts';
import { migrate } from '../../src/infra/migrate.ts';

export type Backend = 'embedded' | 'postgres';
export const backend = (process.env.COFFER_TEST_BACKEND ?? 'embedded') as Backend;

/** A name unique to this run and worker process: schema and Redis key prefix. */
export function namespace(): string {
  return `coffer_t_${inject('runId')}_${process.pid}`;
}

let shared: Promise<Db> | undefined;

/** The database of this worker process, migrated: PGlite in memory, or a fresh schema of the test PostgreSQL. */
export function testDb(): Promise<Db> {
  shared ??= (async () => {
    const db =
      backend === 'postgres'
        ? await openPostgres(process.env.COFFER_TEST_DATABASE_URL!, { schema: namespace() })
        : await openPglite(undefined);
    await migrate(db);
    return db;
  })();
  return shared;
}

/** A second, independent connection pool to the same database (a second server, a second worker). */
export async function secondDb(): Promise<Db> {
  if (backend === 'postgres')
    return openPostgres(process.env.COFFER_TEST_DATABASE_URL!, { schema: namespace() });
  return testDb();
}

export function testCache(): Cache {
  return backend === 'postgres' && process.env.COFFER_TEST_REDIS_URL
    ? redisCache(process.env.COFFER_TEST_REDIS_URL, `${namespace()}:`)
    : memoryCache();
}

/** clamd for the PostgreSQL pass when CI provides one; the built-in EICAR scanner otherwise. */
export function testClamdUrl(): string | undefined {
  return backend === 'postgres' ? process.env.COFFER_TEST_CLAMD_URL : undefined;
}
