import type { Db } from './db.ts';
import { loadMigrations } from './migrations/index.ts';

// Any constant works; it only has to be the same for every Coffer process.
const MIGRATION_LOCK = 7_302_431_118;

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
