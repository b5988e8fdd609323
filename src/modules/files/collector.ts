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
import * as repo from './collector-repo.ts';
import { removeStaleUploads } from './stale-uploads.ts';

/** What a pass takes at most of each kind of garbage. */
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

  /**
   * Runs `step` (which collects up to `limit` and answers how many it found) `batch` at a time while it
   * finds a full batch, up to PER_PASS; answers how many in all.
   */
  async function inBatches(step: (limit: number) => Promise<number>): Promise<number> {
    let count = 0;
    while (count < PER_PASS) {
      const found = await step(batch);
      count += found;
      if (found < batch) break;
    }
    return count;
  }

  /** Files taken by `take`, purged: how many. */
  const purgeTaken =
    (take: (limit: number) => Promise<{ id: string; storage_key: string }[]>) => async (limit: number) => {
      const rows = await take(limit);
      await purge(rows);
      return rows.length;
    };

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
    return inBatches(async (limit) => {
      const rejected = await rejectedUncollected(db, graceSeconds, limit);
      for (const row of rejected) await store.delete(row.storage_key);
      if (rejected.length > 0)
        await markContentsCollected(
          db,
          rejected.map((row) => row.id),
        );
      return rejected.length;
    });
  }

  /** Objects whose content was replaced where versioning is off, after the grace period. */
  async function purgeRetired(): Promise<number> {
    return inBatches(async (limit) => {
      const keys = await repo.retiredUncollected(db, graceSeconds, limit);
      for (const key of keys) await store.delete(key);
      if (keys.length > 0) await repo.forgetRetired(db, keys);
      return keys.length;
    });
  }

  return {
    /** One pass; returns how many files it failed (abandoned) and purged, and the leftovers it removed. */
    async sweep(): Promise<{ abandoned: number; purged: number; rejected: number; stale: number }> {
      const abandoned = await inBatches(
        purgeTaken(async (limit) => {
          const failed = await repo.failAbandonedUploads(db, graceSeconds, limit);
          if (failed.length > 0) metrics?.uploads.inc({ outcome: 'expired' }, failed.length);
          return failed;
        }),
      );
      const purged = await inBatches(purgeTaken((limit) => repo.deletedUncollected(db, graceSeconds, limit)));
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
