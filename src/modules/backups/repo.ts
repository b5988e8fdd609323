import type { Queryable } from '../../infra/db.ts';

// A backup is of the whole database: these statements read other modules' tables, and write none.

/**
 * Every storage key the database refers to and has not purged: files' current content, their
 * versions and their new content not current yet. Tables a database migrated long ago lacks are skipped.
 */
export async function referencedKeys(q: Queryable): Promise<string[]> {
  const tables = new Set(
    (
      await q.query<{ name: string }>(
        'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()',
      )
    ).map((row) => row.name),
  );
  const sources = ['SELECT storage_key FROM files WHERE purged_at IS NULL'];
  if (tables.has('file_versions')) {
    sources.push(
      'SELECT v.storage_key FROM file_versions v JOIN files f ON f.id = v.file_id WHERE f.purged_at IS NULL',
    );
  }
  if (tables.has('pending_contents'))
    sources.push('SELECT storage_key FROM pending_contents WHERE purged_at IS NULL');
  const rows = await q.query<{ storage_key: string }>(`${sources.join(' UNION ')} ORDER BY 1`);
  return rows.map((row) => row.storage_key);
}

/** Reads a table of the restored database, so that one without Coffer's tables fails the restore, not the next start. */
export async function probeRestored(q: Queryable): Promise<void> {
  await q.query('SELECT count(*) FROM files');
}
