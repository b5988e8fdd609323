import type { Queryable } from './db.ts';
import { quoteIdent } from './db.ts';

/** A table is vacuumed once it has grown this much past its size at its last vacuum or analyze… */
const GROWTH_FACTOR = 1.2;
/** …and by at least this many bytes, so that small tables are not vacuumed over and over. */
const MIN_GROWTH_BYTES = 64 * 1024;
const PAGE_BYTES = 8192;

/**
 * PGlite runs PostgreSQL in single-user mode, where autovacuum never runs and no table statistics
 * are counted: without this, every update and delete leaves a dead row that scans keep reading, and
 * the planner keeps the estimates of an empty database. This stands in for autovacuum with what
 * single-user mode still tells: since dead space is reused only after a vacuum, churn makes a table
 * grow, so a table that grew by a fifth past the size its last VACUUM/ANALYZE recorded (relpages)
 * is vacuumed and analyzed (autovacuum's own default scale). Returns the tables it vacuumed.
 */
export async function vacuumChurned(db: Queryable): Promise<string[]> {
  const tables = await db.query<{ name: string; bytes: number; pages: number }>(
    `SELECT c.relname AS name, pg_relation_size(c.oid) AS bytes, c.relpages::int8 AS pages
     FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`,
  );
  const due = tables.filter(
    (t) =>
      t.bytes > t.pages * PAGE_BYTES * GROWTH_FACTOR && t.bytes - t.pages * PAGE_BYTES >= MIN_GROWTH_BYTES,
  );
  for (const table of due) await db.exec(`VACUUM (ANALYZE) ${quoteIdent(table.name)}`);
  return due.map((t) => t.name);
}
