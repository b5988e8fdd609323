import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { ImageConfig } from '../../config.ts';
import type { Db } from '../../infra/db.ts';
import { CONTENT_TYPE_OF, type RenderSpec } from '../../infra/images/render.ts';
import type { Slice } from '../../infra/storage/local/slices.ts';
import { isLocalStore } from '../../infra/storage/local/store.ts';
import { isStoreError, type ObjectStore } from '../../infra/storage/object-store.ts';
import type { FileRow } from '../files/repo.ts';
import * as repo from './repo.ts';

/** The total is summed again once this process stored 1/this of the budget. */
const CHECK_EVERY_FRACTION = 100;
/** Renditions removed per round when the cache is past its budget. */
const EVICT_BATCH = 100;
/** How long the uses of stored renditions are gathered before they are written, in one statement. */
const USES_FLUSH_MS = 10_000;
/** Bytes of stored renditions each process also holds in memory, least recently used first out. */
const HELD_BYTES = 32 * 1024 * 1024;
/** Stored renditions up to this size (thumbnails, previews) are held in memory; larger ones are not. */
const HELD_MAX = 1024 * 1024;

/**
 * The renditions made and stored so far: the small ones also held in memory, their uses recorded in
 * batches, and the least recently used evicted once the total is past the budget.
 */
export function createRenditionCache(deps: {
  db: Db;
  store: ObjectStore;
  images: ImageConfig;
  logger: Logger;
}) {
  const { db, store, images, logger } = deps;
  let evicting: Promise<void> | undefined;
  /** Bytes this process stored since it last summed the total. */
  let unchecked = 0;
  /**
   * Stored renditions served since the last flush. Their last use is written in batches, off the
   * request: the order of eviction is least recently used at the flush's granularity (USES_FLUSH_MS,
   * and across servers), which is what the budget needs; every eviction pass flushes first.
   */
  let used = new Set<string>();
  let flushTimer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> = Promise.resolve();
  /**
   * The bytes of small stored renditions, by key. A key names one source content and one set of
   * parameters, so its bytes never change; whether the rendition is still stored (not evicted) is
   * read with its file on every request, so a held one is served only while its row stands.
   */
  const held = new LRUCache<string, Buffer>({
    maxSize: HELD_BYTES,
    maxEntrySize: HELD_MAX,
    sizeCalculation: (bytes) => bytes.length,
  });
  /** Reads of small stored renditions under way, by key: requests arriving together share one. */
  const reading = new Map<string, Promise<Buffer>>();

  /** Notes a stored rendition's use; written with the others within USES_FLUSH_MS. */
  function markUsed(key: string): void {
    used.add(key);
    flushTimer ??= setTimeout(() => void flushUses(), USES_FLUSH_MS).unref();
  }

  /** Writes the uses gathered so far (a failed write loses them: the order is approximate anyway). */
  function flushUses(): Promise<void> {
    clearTimeout(flushTimer);
    flushTimer = undefined;
    const keys = [...used];
    used = new Set();
    if (keys.length === 0) return flushing;
    flushing = flushing
      .then(() => repo.touchRenditions(db, keys))
      .catch((error) => logger.warn({ err: error }, 'rendition uses not recorded'));
    return flushing;
  }

  /**
   * The bytes of a stored rendition of `size`: held in memory from then on when it is small; else
   * where they lie on the local store (sent from there), or a stream.
   */
  async function readStored(key: string, size: number): Promise<Buffer | Readable | Slice[]> {
    if (size <= HELD_MAX) return readHeld(key);
    return isLocalStore(store) ? store.slicesOf(key) : store.read(key);
  }

  /** A small stored rendition: held already, else read whole and held; one read per key at a time. */
  function readHeld(key: string): Promise<Buffer> {
    const bytes = held.get(key);
    if (bytes) return Promise.resolve(bytes);
    let pending = reading.get(key);
    if (!pending) {
      pending = (async () => {
        const bytes = await buffer(await store.read(key));
        held.set(key, bytes);
        return bytes;
      })().finally(() => reading.delete(key));
      reading.set(key, pending);
    }
    return pending;
  }

  /** Stores a rendition and records it (its size counts towards the budget from then on). */
  async function keep(
    file: Pick<FileRow, 'id' | 'project_id'>,
    spec: RenderSpec,
    key: string,
    data: Buffer,
  ): Promise<void> {
    const contentType = CONTENT_TYPE_OF[spec.format];
    try {
      await store.write(key, Readable.from([data]), { size: data.length, contentType });
    } catch (error) {
      // Another server stored the same rendition first: the same bytes.
      if (!isStoreError(error, 'AlreadyExists')) throw error;
    }
    await repo.insertRendition(db, {
      key,
      file_id: file.id,
      project_id: file.project_id,
      content_type: contentType,
      size_bytes: data.length,
    });
    held.set(key, data);
    evictPastBudget(data.length);
  }

  /**
   * Removes the least recently used renditions until the total is within the budget (one pass at a
   * time). The total is summed again only once this process stored another hundredth of the budget:
   * each server overshoots it by that much at most, and a render costs no sum over the whole table.
   */
  function evictPastBudget(added: number): void {
    unchecked += added;
    if (evicting || unchecked < images.renditionCacheBytes / CHECK_EVERY_FRACTION) return;
    unchecked = 0;
    evicting = (async () => {
      await flushUses();
      for (;;) {
        const excess = (await repo.totalRenditionBytes(db)) - images.renditionCacheBytes;
        if (excess <= 0) return;
        const oldest = await repo.leastRecentlyUsed(db, EVICT_BATCH);
        const victims: string[] = [];
        let freed = 0;
        for (const row of oldest) {
          if (freed >= excess) break;
          victims.push(row.key);
          freed += row.size_bytes;
        }
        for (const key of victims) {
          held.delete(key);
          await store.delete(key);
        }
        await repo.forgetRenditions(db, victims);
      }
    })()
      .catch((error) => logger.warn({ err: error }, 'rendition eviction failed'))
      .finally(() => {
        evicting = undefined;
      });
  }

  return {
    /** Whether this process holds the rendition in memory. */
    holds: (key: string) => held.has(key),
    readStored,
    markUsed,
    flushUses,
    keep,
  };
}
