import type { Queryable } from '../../infra/db.ts';
import { checkTransition } from './states.ts';

/**
 * What the collector reads and marks in the files' tables: the uploads it fails once abandoned, the
 * files and retired objects (see retireObject in repo.ts) whose objects it removes, and whether an unfinished
 * upload in the store still has its file.
 */

/**
 * Fails up to `limit` uploads never confirmed within their URL lifetime plus `graceSeconds`
 * (`uploading` → `failed`, upload_abandoned), skipping those under legal hold; answers their objects.
 */
export async function failAbandonedUploads(
  q: Queryable,
  graceSeconds: number,
  limit: number,
): Promise<{ id: string; storage_key: string }[]> {
  checkTransition('uploading', 'failed');
  return q.query(
    `UPDATE files SET status = 'failed', failure_reason = 'upload_abandoned', upload_expires_at = NULL, updated_at = now()
     WHERE id IN (
       SELECT id FROM files WHERE status = 'uploading' AND deleted_at IS NULL AND NOT legal_hold
         AND upload_expires_at < now() - make_interval(secs => $1)
       LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING id, storage_key`,
    [graceSeconds, limit],
  );
}

/** Up to `limit` files deleted longer than `graceSeconds` ago whose objects are not collected yet. */
export function deletedUncollected(
  q: Queryable,
  graceSeconds: number,
  limit: number,
): Promise<{ id: string; storage_key: string }[]> {
  return q.query(
    `SELECT id, storage_key FROM files
     WHERE deleted_at IS NOT NULL AND purged_at IS NULL AND deleted_at < now() - make_interval(secs => $1)
     ORDER BY deleted_at LIMIT $2`,
    [graceSeconds, limit],
  );
}

/** Marks the files whose objects were all removed. */
export async function markCollected(q: Queryable, ids: string[]): Promise<void> {
  await q.query('UPDATE files SET purged_at = now() WHERE id = ANY($1::text[])', [ids]);
}

/** Whether a file still waits for the bytes of `key` (an upload URL not confirmed, an open multipart upload). */
export async function isUploadingTo(q: Queryable, key: string): Promise<boolean> {
  const rows = await q.query("SELECT 1 FROM files WHERE storage_key = $1 AND status = 'uploading'", [key]);
  return rows.length > 0;
}

/** Up to `limit` objects retired longer than `graceSeconds` ago. */
export async function retiredUncollected(
  q: Queryable,
  graceSeconds: number,
  limit: number,
): Promise<string[]> {
  const rows = await q.query<{ storage_key: string }>(
    `SELECT storage_key FROM retired_objects WHERE retired_at < now() - make_interval(secs => $1)
     ORDER BY retired_at LIMIT $2`,
    [graceSeconds, limit],
  );
  return rows.map((row) => row.storage_key);
}

export async function forgetRetired(q: Queryable, storageKeys: string[]): Promise<void> {
  await q.query('DELETE FROM retired_objects WHERE storage_key = ANY($1::text[])', [storageKeys]);
}
