import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Db } from './db.ts';

const MIGRATIONS_DIR = join(import.meta.dirname, 'migrations');
// Any constant works; it only has to be the same for every Coffer process.
const MIGRATION_LOCK = 7_302_431_118;

export interface Migration {
  name: string;
  sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((name) => /^\d{3}_[a-z0-9_]+\.sql$/.test(name))
    .sort()
    .map((name) => ({ name, sql: readFileSync(join(dir, name), 'utf8') }));
}

/**
 * Applies the pending migrations in one transaction under an advisory lock, so that servers
 * starting together against one database apply each migration exactly once.
 */
export async function migrate(db: Db, migrations = loadMigrations()): Promise<string[]> {
  return db.tx(async (q) => {
    await q.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await q.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const applied = new Set(
      (await q.query<{ name: string }>('SELECT name FROM schema_migrations')).map((row) => row.name),
    );
    const pending = migrations.filter((m) => !applied.has(m.name));
    for (const migration of pending) {
      await q.exec(migration.sql);
      await q.query('INSERT INTO schema_migrations (name) VALUES ($1)', [migration.name]);
    }
    return pending.map((m) => m.name);
  });
}
