import { existsSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import pg from 'pg';
import { tarFolder } from './embedded-snapshot.ts';
import { copyTemplate } from './embedded-template.ts';
import { forgetStale, PgliteStatements, prepared } from './prepared.ts';
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
  /** The connections in use and available, for the metrics. */
  poolStats(): PoolStats;
  /**
   * The embedded database only: a copy of all of it (a gzipped tarball of its folder), taken between
   * transactions, that openPglite can load (a backup).
   */
  snapshot?<T>(consume: (tarball: Readable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A PostgreSQL server's pool; the embedded database is one connection, always open (idle and waiting unknown). */
export interface PoolStats {
  max: number;
  open: number;
  idle?: number;
  /** Queries waiting for a connection. */
  waiting?: number;
}

const INT8 = 20;

export interface DbOptions {
  /** Search path schema, so that test runs and tenants of one server never see each other's tables. */
  schema?: string;
}

/**
 * The database server could not be reached, or dropped the connection (a restart, a failover): the
 * statement failed, and of its transaction only what a commit confirmed happened.
 */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError';
}

/** Network failures, and PostgreSQL's connection exceptions (class 08) and shutdowns (57P01–57P03). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P01',
  '57P02',
  '57P03',
]);
/** What node-postgres throws, without a code, when it loses a connection or cannot get one in time. */
const UNREACHABLE_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

/** A DatabaseUnavailableError for a lost or refused connection (the original as its cause); anything else unchanged. */
function unreachable(error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof DatabaseUnavailableError) return error;
  const code = (error as { code?: unknown }).code;
  const lost =
    (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || code.startsWith('08'))) ||
    UNREACHABLE_MESSAGES.test(error.message);
  return lost
    ? new DatabaseUnavailableError(`The database is unavailable: ${error.message}`, { cause: error })
    : error;
}

export async function openPostgres(url: string, options: DbOptions = {}): Promise<Db> {
  const max = 20;
  const pool = new pg.Pool({
    connectionString: url,
    max,
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
      const run = () => pool.query(prepared(sql, params));
      const result = await run()
        .catch((error: unknown) => (forgetStale(sql, error) ? run() : Promise.reject(error)))
        .catch((error: unknown) => {
          throw unreachable(error);
        });
      return result.rows as T[];
    },
    async exec(sql: string) {
      await pool.query(sql).catch((error: unknown) => {
        throw unreachable(error);
      });
    },
    async tx<T>(work: (q: Queryable) => Promise<T>) {
      const client = await pool.connect().catch((error: unknown) => {
        throw unreachable(error);
      });
      // A checked-out client has no pool listener: a connection lost between two statements (a
      // server restart) would be an unhandled 'error' event, which ends the process. It is noted,
      // and the connection is dropped instead of going back to the pool.
      let broken: Error | undefined;
      const onError = (error: Error) => {
        broken = error;
      };
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        const result = await work({
          async query<R>(sql: string, params?: unknown[]) {
            // A stale plan fails this transaction; the statement is prepared anew for the next one.
            const result = await client.query(prepared(sql, params)).catch((error: unknown) => {
              forgetStale(sql, error);
              throw error;
            });
            return result.rows as R[];
          },
          async exec(sql: string) {
            await client.query(sql);
          },
        });
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => {
          broken ??= rollbackError;
        });
        throw unreachable(error);
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    },
    async ping(timeoutMs: number) {
      await withTimeout(
        pool.query({ text: 'SELECT 1', query_timeout: timeoutMs } as pg.QueryConfig),
        timeoutMs,
      );
    },
    poolStats: () => ({ max, open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close() {
      await pool.end();
    },
  };
}

/**
 * The embedded database runs in this process's memory: PostgreSQL's default 128 MB of shared
 * buffers would be most of an idle server's resident memory. The files it reads stay in the
 * system's page cache, so a smaller pool costs little.
 */
const EMBEDDED_SETTINGS = ['-c', 'shared_buffers=16MB'];

/** The embedded database is in use by another process. */
export class DatabaseInUseError extends Error {}

/** The lock file lockDataDir writes and the one it writes aside first (its pid appended): not database content. */
export const isLockFile = (name: string) => /^coffer\.lock(\.\d+)?$/.test(name);

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
  // Written aside, then linked into place: the lock appears with its content whole, so a process
  // starting at the same moment never reads an empty lock and takes it for a stale one.
  const mine = `${lock}.${process.pid}`;
  writeFileSync(mine, self);
  for (;;) {
    try {
      linkSync(mine, lock);
      rmSync(mine, { force: true });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const [pid, startTime] = readFileSync(lock, 'utf8').trim().split(/\s+/);
      const holder = Number(pid);
      if (holder && holder !== process.pid && isAlive(holder, startTime)) {
        rmSync(mine, { force: true });
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

/** Takes the embedded database in `dataDir` for this process (see lockDataDir); returns the release function. */
export function lockEmbeddedDatabase(dataDir: string): () => void {
  const path = join(dataDir, 'pglite');
  mkdirSync(path, { recursive: true });
  return lockDataDir(path);
}

export async function openPglite(
  dataDir: string | undefined,
  options: {
    /** A snapshot (Db.snapshot) to load into the empty folder first: a restore. */
    load?: Blob;
    /** The caller holds the lock already (lockEmbeddedDatabase) and releases it. */
    locked?: boolean;
  } = {},
): Promise<Db> {
  let path: string | undefined;
  let unlock = () => {};
  if (dataDir) {
    path = join(dataDir, 'pglite');
    if (!options.locked) unlock = lockEmbeddedDatabase(dataDir);
  }
  let db: PGlite;
  try {
    if (path && !options.load && !existsSync(join(path, 'PG_VERSION'))) await copyTemplate(path, isLockFile);
    db = await PGlite.create({
      dataDir: path,
      loadDataDir: options.load,
      extensions: { pg_trgm },
      parsers: { [INT8]: Number },
      startParams: [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS],
    });
  } catch (error) {
    unlock();
    throw error;
  }
  const statements = new PgliteStatements(db);
  return {
    kind: 'pglite',
    async query<T>(sql: string, params?: unknown[]) {
      if (!statements.accepts(sql)) return (await db.query<T>(sql, params as unknown[])).rows;
      await db._checkReady();
      // The locks PGlite's own query takes: no transaction in between, no other statement at once.
      const rows = await db._runExclusiveTransaction(() =>
        db._runExclusiveQuery(() => statements.run<T>(sql, params)),
      );
      await db.syncToFs();
      return rows;
    },
    async exec(sql: string) {
      await db.exec(sql);
    },
    async tx<T>(work: (q: Queryable) => Promise<T>) {
      return db.transaction(async (t) =>
        work({
          async query<R>(sql: string, params?: unknown[]) {
            if (t.closed) throw new Error('Transaction is closed');
            if (!statements.accepts(sql)) return (await t.query<R>(sql, params as unknown[])).rows;
            return db._runExclusiveQuery(() => statements.run<R>(sql, params));
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
    poolStats: () => ({ max: 1, open: 1 }),
    async snapshot<T>(consume: (tarball: Readable) => Promise<T>) {
      await db.exec('CHECKPOINT'); // less to replay when the copy is opened
      // Inside a transaction of its own, so that no other is between two of its statements, and holding
      // the query lock as dumpDataDir does, so that no statement writes while the folder is read.
      return db.transaction(async () => {
        // An in-memory database has no folder: PGlite's own dump, in memory as the database is.
        if (!path) return consume(Readable.fromWeb((await db.dumpDataDir('gzip')).stream() as never));
        const folder = path;
        return (db as unknown as ExclusiveQueries)._runExclusiveQuery(() => consume(tarFolder(folder)));
      });
    },
    async close() {
      await db.close();
      unlock();
    },
  };
}

/** PGlite's own lock of its statements (what dumpDataDir holds while it reads the database's files). */
interface ExclusiveQueries {
  _runExclusiveQuery<T>(work: () => Promise<T>): Promise<T>;
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
