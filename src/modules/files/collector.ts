import type { Logger } from 'pino';
import type { Db } from '../../infra/db.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import {
  contentKeysOf,
  failAbandonedContents,
  markContentsCollected,
  rejectedUncollected,
} from '../ingest/content-repo.ts';
import { forgetRenditions, renditionKeysOf } from '../renditions/repo.ts';
import { versionKeysOf } from '../versions/repo.ts';
import * as repo from './repo.ts';
import { removeStaleUploads } from './stale-uploads.ts';

const BATCH = 100;

/**
 * Removes stored objects nobody can reach any more: those of files deleted longer than the
 * grace period ago, and those of uploads never confirmed within their URL lifetime plus the
 * grace period (such files become `failed`). Object deletion is idempotent, so the purge mark
 * is set only after the objects are gone and a crash in between just repeats the work.
 */
export function createCollector(deps: {
  db: Db;
  store: ObjectStore;
  graceSeconds: number;
  uploadUrlTtlSeconds: number;
  logger: Logger;
  metrics?: Metrics;
}) {
  const { db, store, graceSeconds, uploadUrlTtlSeconds, logger, metrics } = deps;

  /** Deletes every object the files refer to (current content, versions, new content, renditions) and marks them collected. */
  async function purge(rows: { id: string; storage_key: string }[]): Promise<void> {
    if (rows.length === 0) return;
    const ids = rows.map((row) => row.id);
    const others = [...(await versionKeysOf(db, ids)), ...(await contentKeysOf(db, ids))];
    const renditions = await renditionKeysOf(db, ids);
    const keys = new Set([
      ...rows.map((row) => row.storage_key),
      ...others.map((row) => row.storage_key),
      ...renditions,
    ]);
    for (const key of keys) await store.delete(key);
    await forgetRenditions(db, renditions);
    await repo.markCollected(db, ids);
  }

  /** New content that never became current (abandoned, failed or quarantined) is garbage after the grace period. */
  async function purgeRejectedContent(): Promise<number> {
    await failAbandonedContents(db, graceSeconds);
    const rejected = await rejectedUncollected(db, graceSeconds, BATCH);
    for (const row of rejected) await store.delete(row.storage_key);
    if (rejected.length > 0)
      await markContentsCollected(
        db,
        rejected.map((row) => row.id),
      );
    return rejected.length;
  }

  /** Objects whose content was replaced where versioning is off, after the grace period. */
  async function purgeRetired(): Promise<number> {
    const keys = await repo.retiredUncollected(db, graceSeconds, BATCH);
    for (const key of keys) await store.delete(key);
    if (keys.length > 0) await repo.forgetRetired(db, keys);
    return keys.length;
  }

  return {
    /** One pass; returns how many files it failed (abandoned) and purged, and the leftovers it removed. */
    async sweep(): Promise<{ abandoned: number; purged: number; rejected: number; stale: number }> {
      const abandoned = await repo.failAbandonedUploads(db, graceSeconds, BATCH);
      if (abandoned.length > 0) metrics?.uploads.inc({ outcome: 'expired' }, abandoned.length);
      await purge(abandoned);
      const deleted = await repo.deletedUncollected(db, graceSeconds, BATCH);
      await purge(deleted);
      const rejected = (await purgeRejectedContent()) + (await purgeRetired());
      // Bytes of uploads whose process died (temp files, parts, incomplete store uploads).
      const stale = await removeStaleUploads(db, store, uploadUrlTtlSeconds + graceSeconds);
      if (abandoned.length + deleted.length + rejected + stale > 0) {
        logger.info(
          { abandoned: abandoned.length, purged: deleted.length, rejected, stale },
          'collected stored objects',
        );
      }
      return { abandoned: abandoned.length, purged: deleted.length, rejected, stale };
    },
  };
}

export type Collector = ReturnType<typeof createCollector>;
