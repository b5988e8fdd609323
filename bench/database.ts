/**
 * The database the benchmarks run Coffer on: the embedded PGlite (default, in each server's data
 * directory) or PostgreSQL (`--db postgres`, the server named by COFFER_BENCH_DATABASE_URL). On
 * PostgreSQL every data directory gets a database of its own, created on its first start (a restart on
 * the same data directory finds its data again) and dropped at the end of the run. Databases left by an
 * interrupted run are dropped by the next one, once their run's process is gone.
 */
import pg from 'pg';

export type DbKind = 'pglite' | 'postgres';

const PREFIX = 'coffer_bench_';
let kind: DbKind = 'pglite';
/** Data directory → database name, in order of creation. */
const created = new Map<string, string>();

function adminUrl(): string {
  const url = process.env.COFFER_BENCH_DATABASE_URL?.trim();
  if (!url) {
    throw new Error(
      '--db postgres needs COFFER_BENCH_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)',
    );
  }
  return url;
}

/** The URL of database `name` on the server of COFFER_BENCH_DATABASE_URL. */
function databaseUrl(name: string): string {
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

async function withAdmin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Chooses the database of this run; on PostgreSQL, checks the server and drops what interrupted runs left. */
export async function useDatabase(chosen: DbKind): Promise<void> {
  kind = chosen;
  if (kind !== 'postgres') return;
  await withAdmin(async (client) => {
    const { rows } = await client.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE datname LIKE $1',
      [`${PREFIX}%`],
    );
    for (const { datname } of rows) {
      const pid = Number(/^coffer_bench_(\d+)_/.exec(datname)?.[1]);
      if (pid && pid !== process.pid && !alive(pid)) {
        await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
      }
    }
  });
}

/** The database of the server on `dataDir`: undefined on PGlite (it lives in the data directory). */
export async function databaseFor(dataDir: string): Promise<string | undefined> {
  if (kind === 'pglite') return undefined;
  let name = created.get(dataDir);
  if (!name) {
    name = `${PREFIX}${process.pid}_${created.size + 1}`;
    await withAdmin((client) => client.query(`CREATE DATABASE "${name}"`));
    created.set(dataDir, name);
  }
  return databaseUrl(name);
}

/** Drops every database this run created (their servers must be stopped, or are disconnected). */
export async function dropDatabases(): Promise<void> {
  if (created.size === 0) return;
  await withAdmin(async (client) => {
    for (const name of created.values()) await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
  created.clear();
}
