import type { Queryable } from '../../infra/db.ts';

export interface RenditionRow {
  key: string;
  file_id: string;
  project_id: string;
  content_type: string;
  size_bytes: number;
}

/** How long a rendition's last use may lag: serving it writes at most once per this many seconds. */
const TOUCH_SECONDS = 60;

/**
 * A stored rendition, marked used (at most once per TOUCH_SECONDS, so that serving it seldom writes)
 * in the same statement: the least recently used go first when the store is over its budget.
 */
export async function useRendition(q: Queryable, key: string): Promise<RenditionRow | undefined> {
  const [row] = await q.query<RenditionRow>(
    `WITH touched AS (
       UPDATE renditions SET last_used_at = now()
       WHERE key = $1 AND last_used_at < now() - make_interval(secs => $2)
     )
     SELECT key, file_id, project_id, content_type, size_bytes FROM renditions WHERE key = $1`,
    [key, TOUCH_SECONDS],
  );
  return row;
}

/** Records a stored rendition; another process that stored the same one first keeps its row. */
export async function insertRendition(q: Queryable, row: RenditionRow): Promise<void> {
  await q.query(
    `INSERT INTO renditions (key, file_id, project_id, content_type, size_bytes) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (key) DO NOTHING`,
    [row.key, row.file_id, row.project_id, row.content_type, row.size_bytes],
  );
}

export async function totalRenditionBytes(q: Queryable): Promise<number> {
  const [row] = await q.query<{ total: number }>(
    'SELECT coalesce(sum(size_bytes), 0)::bigint AS total FROM renditions',
  );
  return row!.total;
}

/** The least recently used renditions first. */
export async function leastRecentlyUsed(q: Queryable, limit: number): Promise<RenditionRow[]> {
  return q.query<RenditionRow>(
    `SELECT key, file_id, project_id, content_type, size_bytes FROM renditions
     ORDER BY last_used_at, key LIMIT $1`,
    [limit],
  );
}

export async function forgetRenditions(q: Queryable, keys: string[]): Promise<void> {
  await q.query('DELETE FROM renditions WHERE key = ANY($1::text[])', [keys]);
}

/** The renditions of these files (collected with them). */
export async function renditionKeysOf(q: Queryable, fileIds: string[]): Promise<string[]> {
  const rows = await q.query<{ key: string }>('SELECT key FROM renditions WHERE file_id = ANY($1::text[])', [
    fileIds,
  ]);
  return rows.map((row) => row.key);
}
