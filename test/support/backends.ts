import { inject } from 'vitest';
import { type Cache, memoryCache, redisCache } from '../../src/infra/cache.ts';
import { type Db, openPglite, openPostgres } from '../../src/infra/db.ts';
import { migrate } from '../../src/infra/migrate.ts';

export type Backend = 'embedded' | 'postgres';
export const backend = (process.env.COFFER_TEST_BACKEND ?? 'embedded') as Backend;

export type Storage = 'local' | 's3';
/** Where Coffer keeps the files: a local data directory, or the test S3 server's one bucket, which all tests share. */
export const storage = (process.env.COFFER_TEST_STORAGE ?? 'local') as Storage;

export interface S3TestSettings {
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  bucket: string;
}

/** The test S3 server that CI provides (`.ci/rgw.sh`), or undefined without one. */
export function s3TestSettings(): S3TestSettings | undefined {
  const env = process.env;
  if (!env.COFFER_TEST_S3_ENDPOINT) return undefined;
  const need = (name: string): string => {
    const value = env[name];
    if (!value) throw new Error(`${name} must be set along with COFFER_TEST_S3_ENDPOINT`);
    return value;
  };
  return {
    endpoint: env.COFFER_TEST_S3_ENDPOINT,
    region: env.COFFER_TEST_S3_REGION ?? 'us-east-1',
    accessKeyId: need('COFFER_TEST_S3_ACCESS_KEY_ID'),
    secretAccessKey: need('COFFER_TEST_S3_SECRET_ACCESS_KEY'),
    bucket: need('COFFER_TEST_S3_BUCKET'),
  };
}

/** Coffer's storage settings for this run: none for local storage, the test S3 server's for s3. */
export function testStorageEnv(): Record<string, string> {
  if (storage === 'local') return {};
  const s3 = s3TestSettings();
  if (!s3)
    throw new Error('COFFER_TEST_STORAGE=s3 needs COFFER_TEST_S3_ENDPOINT and the other COFFER_TEST_S3_*');
  return {
    COFFER_STORAGE: 's3',
    COFFER_S3_ENDPOINT: s3.endpoint,
    COFFER_S3_REGION: s3.region,
    COFFER_S3_ACCESS_KEY_ID: s3.accessKeyId,
    COFFER_S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    COFFER_S3_BUCKET: s3.bucket,
    COFFER_S3_FORCE_PATH_STYLE: 'true',
  };
}

/**
 * The server key of every Coffer this suite runs on PostgreSQL (COFFER_SECRET_KEY is required there);
 * on the embedded database each data dir makes its own secret.key.
 */
export const TEST_SECRET_KEY = Buffer.alloc(32, 's3cr3t').toString('base64');

/** COFFER_SECRET_KEY for a Coffer on this run's database: set on PostgreSQL, none on the embedded one. */
export function testSecretKeyEnv(): Record<string, string> {
  return backend === 'postgres' ? { COFFER_SECRET_KEY: TEST_SECRET_KEY } : {};
}

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

export async function testCache(): Promise<Cache> {
  return backend === 'postgres' && process.env.COFFER_TEST_REDIS_URL
    ? await redisCache(process.env.COFFER_TEST_REDIS_URL, `${namespace()}:`)
    : memoryCache();
}

/** clamd for the PostgreSQL pass when CI provides one; the built-in EICAR scanner otherwise. */
export function testClamdUrl(): string | undefined {
  return backend === 'postgres' ? process.env.COFFER_TEST_CLAMD_URL : undefined;
}
