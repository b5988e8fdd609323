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

/** Files a pass takes at most of each kind of garbage. */
const PER_PASS = 100;
/**
 * Files one statement takes: on the embedded engine a statement holds the server's one thread for as
 * long as it runs (an update of 100 files, each in sixteen indexes, holds it about 50 ms at a million),
 * so the pass takes its files a few at a time, and requests run between two statements.
 */
const PER_STATEMENT = { postgres: PER_PASS, pglite: 20 } as const;

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
  const batch = PER_STATEMENT[db.kind];

  /** Takes files with `take` and purges them, `batch` at a time, up to PER_PASS; answers how many. */
  async function purgeEach(take: (limit: number) => Promise<{ id: string; storage_key: string }[]>) {
    let count = 0;
    while (count < PER_PASS) {
      const rows = await take(batch);
      await purge(rows);
      count += rows.length;
      if (rows.length < batch) break;
    }
    return count;
  }

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
    const rejected = await rejectedUncollected(db, graceSeconds, batch);
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
    const keys = await repo.retiredUncollected(db, graceSeconds, batch);
    for (const key of keys) await store.delete(key);
    if (keys.length > 0) await repo.forgetRetired(db, keys);
    return keys.length;
  }

  return {
    /** One pass; returns how many files it failed (abandoned) and purged, and the leftovers it removed. */
    async sweep(): Promise<{ abandoned: number; purged: number; rejected: number; stale: number }> {
      const abandoned = await purgeEach(async (limit) => {
        const failed = await repo.failAbandonedUploads(db, graceSeconds, limit);
        if (failed.length > 0) metrics?.uploads.inc({ outcome: 'expired' }, failed.length);
        return failed;
      });
      const purged = await purgeEach((limit) => repo.deletedUncollected(db, graceSeconds, limit));
      const rejected = (await purgeRejectedContent()) + (await purgeRetired());
      // Bytes of uploads whose process died (temp files, parts, incomplete store uploads).
      const stale = await removeStaleUploads(db, store, uploadUrlTtlSeconds + graceSeconds);
      if (abandoned + purged + rejected + stale > 0) {
        logger.info({ abandoned, purged, rejected, stale }, 'collected stored objects');
      }
      return { abandoned, purged, rejected, stale };
    },
  };
}

export type Collector = ReturnType<typeof createCollector>;
