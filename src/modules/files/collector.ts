import type { Logger } from 'pino';
import type { Db } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';

const BATCH = 100;

/**
 * Removes stored objects nobody can reach any more: those of files deleted longer than the
 * grace period ago, and those of uploads never confirmed within their URL lifetime plus the
 * grace period (such files become `failed`). Object deletion is idempotent, so the purge mark
 * is set only after the objects are gone and a crash in between just repeats the work.
 */
export function createCollector(deps: { db: Db; store: ObjectStore; graceSeconds: number; logger: Logger }) {
  const { db, store, graceSeconds, logger } = deps;

  async function purge(rows: { id: string; storage_key: string }[]): Promise<void> {
    for (const row of rows) await store.delete(row.storage_key);
    if (rows.length > 0) {
      await db.query('UPDATE files SET purged_at = now() WHERE id = ANY($1::text[])', [
        rows.map((row) => row.id),
      ]);
    }
  }

  return {
    /** One pass; returns how many files it failed (abandoned) and purged. */
    async sweep(): Promise<{ abandoned: number; purged: number }> {
      const abandoned = await db.query<{ id: string; storage_key: string }>(
        `UPDATE files SET status = 'failed', failure_reason = 'upload_abandoned', upload_expires_at = NULL, updated_at = now()
         WHERE id IN (
           SELECT id FROM files WHERE status = 'uploading' AND deleted_at IS NULL
             AND upload_expires_at < now() - make_interval(secs => $1)
           LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id, storage_key`,
        [graceSeconds, BATCH],
      );
      await purge(abandoned);
      const deleted = await db.query<{ id: string; storage_key: string }>(
        `SELECT id, storage_key FROM files
         WHERE deleted_at IS NOT NULL AND purged_at IS NULL AND deleted_at < now() - make_interval(secs => $1)
         ORDER BY deleted_at LIMIT $2`,
        [graceSeconds, BATCH],
      );
      await purge(deleted);
      if (abandoned.length + deleted.length > 0) {
        logger.info({ abandoned: abandoned.length, purged: deleted.length }, 'collected stored objects');
      }
      return { abandoned: abandoned.length, purged: deleted.length };
    },
  };
}

export type Collector = ReturnType<typeof createCollector>;
