import type { Queryable } from '../../infra/db.ts';
import type { FileRow } from '../files/repo.ts';

export interface RenditionRow {
  key: string;
  file_id: string;
  project_id: string;
  content_type: string;
  size_bytes: number;
}

/** What serving a rendition reads of its file: who may see it, whether it is ready, its content. */
export type ServableFile = Pick<
  FileRow,
  | 'id'
  | 'project_id'
  | 'status'
  | 'deleted_at'
  | 'upload_token_id'
  | 'owner_user_id'
  | 'owner_org_id'
  | 'storage_key'
  | 'etag'
  | 'content_type'
  | 'size_bytes'
>;

/** Stored renditions of a file listed with it at most (past that, which are stored is left unknown). */
export const LISTED_RENDITIONS = 64;

/**
 * The file and, when `key` is given and stored, the size of that rendition: one statement for a
 * request that knows the rendition's key before it has read the file (checked against it afterwards).
 * With `listStored`, also the keys of the file's stored renditions (LISTED_RENDITIONS at most).
 */
export async function findFileAndRendition(
  q: Queryable,
  projectId: string,
  fileId: string,
  key: string | undefined,
  listStored: boolean,
): Promise<
  { file: ServableFile; renditionSize: number | undefined; storedKeys: string[] | undefined } | undefined
> {
  const [row] = await q.query<ServableFile & { rendition_size: number | null; stored_keys: string[] | null }>(
    `SELECT id, project_id, status, deleted_at, upload_token_id, owner_user_id, owner_org_id, storage_key, etag,
       content_type, size_bytes, (SELECT r.size_bytes FROM renditions r WHERE r.key = $3) AS rendition_size,
       CASE WHEN $4 THEN ARRAY(SELECT r.key FROM renditions r WHERE r.file_id = files.id LIMIT $5) END AS stored_keys
     FROM files WHERE project_id = $1 AND id = $2`,
    [projectId, fileId, key ?? null, listStored, LISTED_RENDITIONS],
  );
  if (!row) return undefined;
  const { rendition_size, stored_keys, ...file } = row;
  return { file, renditionSize: rendition_size ?? undefined, storedKeys: stored_keys ?? undefined };
}

export async function findRendition(q: Queryable, key: string): Promise<RenditionRow | undefined> {
  const [row] = await q.query<RenditionRow>(
    'SELECT key, file_id, project_id, content_type, size_bytes FROM renditions WHERE key = $1',
    [key],
  );
  return row;
}

/** Marks renditions used now: the least recently used go first when the store is over its budget. */
export async function touchRenditions(q: Queryable, keys: string[]): Promise<void> {
  await q.query('UPDATE renditions SET last_used_at = now() WHERE key = ANY($1::text[])', [keys]);
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
