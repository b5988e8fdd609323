import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import pg from 'pg';
import { isAlive, processStartTime } from './process-liveness.ts';

/** Anything SQL can be sent to: the database itself or an open transaction. */
export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  tx<T>(work: (q: Queryable) => Promise<T>): Promise<T>;
  /** A trivial query that fails (never hangs) when the database is unreachable. */
  ping(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

const INT8 = 20;

export interface DbOptions {
  /** Search path schema, so that test runs and tenants of one server never see each other's tables. */
  schema?: string;
}

export async function openPostgres(url: string, options: DbOptions = {}): Promise<Db> {
  const pool = new pg.Pool({
    connectionString: url,
    max: 20,
    connectionTimeoutMillis: 2000,
    idleTimeoutMillis: 30_000,
    options: options.schema ? `-c search_path=${options.schema},public` : undefined,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8 ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client that loses its server must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  if (options.schema) {
    await pool.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(options.schema)}`);
  }
  return {
    kind: 'postgres',
    async query<T>(sql: string, params?: unknown[]) {
      const result = await pool.query(sql, params as unknown[]);
      return result.rows as T[];
    },
    async exec(sql: string) {
      await pool.query(sql);
    },
    async tx<T>(work: (q: Queryable) => Promise<T>) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await work({
          async query<R>(sql: string, params?: unknown[]) {
            return (await client.query(sql, params as unknown[])).rows as R[];
          },
          async exec(sql: string) {
            await client.query(sql);
          },
        });
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      } finally {
        client.release();
      }
    },
    async ping(timeoutMs: number) {
      await withTimeout(
        pool.query({ text: 'SELECT 1', query_timeout: timeoutMs } as pg.QueryConfig),
        timeoutMs,
      );
    },
    async close() {
      await pool.end();
    },
  };
}

/** The embedded database is in use by another process. */
export class DatabaseInUseError extends Error {}

/**
 * Takes the embedded database in `path` for this process. PGlite runs inside the process that opens
 * it, so a second process on the same folder would neither see the first one's writes nor keep the
 * files consistent: it is refused while the holder is alive. The lock file holds the holder's pid and,
 * where the system tells it, its start time, so that a pid reused by another process after the holder
 * was killed does not keep the lock. Returns the release function.
 */
function lockDataDir(path: string): () => void {
  const lock = join(path, 'coffer.lock');
  const self = [process.pid, processStartTime(process.pid)].filter(Boolean).join(' ');
  for (;;) {
    try {
      writeFileSync(lock, self, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const [pid, startTime] = readFileSync(lock, 'utf8').trim().split(/\s+/);
      const holder = Number(pid);
      if (holder && holder !== process.pid && isAlive(holder, startTime)) {
        throw new DatabaseInUseError(
          `The embedded database in ${path} is in use by another Coffer process (pid ${holder}). Stop it first, or use its API.`,
        );
      }
      rmSync(lock, { force: true }); // left by a process that is gone
    }
  }
  const release = () => rmSync(lock, { force: true });
  process.once('exit', release);
  return () => {
    process.off('exit', release);
    release();
  };
}

export async function openPglite(dataDir: string | undefined): Promise<Db> {
  let path: string | undefined;
  let unlock = () => {};
  if (dataDir) {
    path = join(dataDir, 'pglite');
    mkdirSync(path, { recursive: true });
    unlock = lockDataDir(path);
  }
  let db: PGlite;
  try {
    db = await PGlite.create({ dataDir: path, extensions: { pg_trgm }, parsers: { [INT8]: Number } });
  } catch (error) {
    unlock();
    throw error;
  }
  return {
    kind: 'pglite',
    async query<T>(sql: string, params?: unknown[]) {
      const result = await db.query<T>(sql, params as unknown[]);
      return result.rows;
    },
    async exec(sql: string) {
      await db.exec(sql);
    },
    async tx<T>(work: (q: Queryable) => Promise<T>) {
      return db.transaction(async (t) =>
        work({
          async query<R>(sql: string, params?: unknown[]) {
            return (await t.query<R>(sql, params as unknown[])).rows;
          },
          async exec(sql: string) {
            await t.exec(sql);
          },
        }),
      );
    },
    async ping(timeoutMs: number) {
      await withTimeout(db.query('SELECT 1'), timeoutMs);
    },
    async close() {
      await db.close();
      unlock();
    },
  };
}

export function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`unsafe identifier ${name}`);
  return `"${name}"`;
}

export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
