import type { Queryable } from './db.ts';

/** A table is vacuumed once it has grown this much past its size at its last vacuum or analyze… */
const GROWTH_FACTOR = 1.2;
/** …and by at least this many bytes, so that small tables are not vacuumed over and over. */
const MIN_GROWTH_BYTES = 64 * 1024;
/** Transactions since a table's oldest unfrozen row past which it is frozen (autovacuum's default). */
const FREEZE_AGE = 200_000_000;
/** Every table at least this often (deletes alone leave dead rows without growing a table)… */
const DAILY_MS = 86_400_000;
/** …and none more often than this, whatever it looks like (no table is vacuumed over and over). */
const MIN_INTERVAL_MS = 60_000;

/**
 * PGlite runs PostgreSQL as a single-user backend, where autovacuum never runs and no table
 * statistics are counted: without this, every update and delete leaves a dead row that scans keep
 * reading, the planner's statistics stay those of the first analyze, and old transaction ids are
 * never frozen. This stands in for autovacuum with what the backend still tells. Since dead space is
 * reused only after a vacuum, churn makes a table grow: a table that grew by a fifth past the size
 * its last VACUUM/ANALYZE recorded (relpages; autovacuum's own default scale) is due, as is one whose
 * rows are due to be frozen, and each table once a day.
 *
 * One table per call, the most grown first (the embedded engine runs in the server's thread: a long
 * vacuum holds every request meanwhile, and between calls they run); returns the table vacuumed, or
 * undefined when none was due.
 */
export function createEmbeddedVacuum(db: Queryable, now: () => number = Date.now) {
  const lastVacuumed = new Map<string, number>();
  const startedAt = now();

  return async function vacuumNext(): Promise<string | undefined> {
    const tables = await db.query<{
      name: string;
      quoted: string;
      growth: number;
      factor: number;
      age: number;
    }>(
      `SELECT c.relname AS name, format('%I', c.relname) AS quoted, t.bytes - t.recorded AS growth,
         t.bytes::float8 / greatest(t.recorded, 1) AS factor, age(c.relfrozenxid) AS age
       FROM pg_class c, LATERAL (
         SELECT pg_relation_size(c.oid) AS bytes, c.relpages::int8 * current_setting('block_size')::int8 AS recorded
       ) AS t
       WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
       ORDER BY growth DESC`,
    );
    const due = tables.find((t) => {
      const since = now() - (lastVacuumed.get(t.name) ?? startedAt);
      if (lastVacuumed.has(t.name) && since < MIN_INTERVAL_MS) return false;
      return (
        (t.growth >= MIN_GROWTH_BYTES && t.factor > GROWTH_FACTOR) || t.age > FREEZE_AGE || since >= DAILY_MS
      );
    });
    if (due) {
      await db.exec(`VACUUM (ANALYZE) ${due.quoted}`);
      lastVacuumed.set(due.name, now());
      return due.name;
    }
    // The system catalogs' rows are frozen by a vacuum of the whole database.
    const [database] = await db.query<{ age: number }>(
      'SELECT age(datfrozenxid) AS age FROM pg_database WHERE datname = current_database()',
    );
    if (database!.age <= FREEZE_AGE) return undefined;
    await db.exec('VACUUM (FREEZE)');
    return '(database)';
  };
}
