import type { Db, Queryable } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { retireObject } from '../../modules/files/repo.ts';
import { type TailPiece, takeEndedTails } from './upload-repo.ts';

const BATCH = 100;

/**
 * Bytes that waited for a part of an upload that ended (terminated, expired): retired (the collector
 * removes them after the grace period), and removed from the store at once where it can. Answers
 * whether it found any, so that the periodic runner comes back at once for more.
 */
export async function collectEndedTails(db: Db, store: ObjectStore): Promise<boolean> {
  const taken = await db.tx(async (q) => {
    const rows = await takeEndedTails(q, BATCH);
    for (const row of rows) for (const piece of row.tail) await retireObject(q, row.project_id, piece.key);
    return rows;
  });
  for (const row of taken) {
    for (const piece of row.tail) await store.delete(piece.key).catch(() => undefined);
  }
  return taken.length > 0;
}

/** Waiting bytes that went into a part: collected after the grace period, and removed now if possible. */
export async function retire(q: Queryable, projectId: string, tail: TailPiece[]) {
  for (const piece of tail) await retireObject(q, projectId, piece.key);
}
export const dropTail = async (store: ObjectStore, tail: TailPiece[]) => {
  for (const piece of tail) await store.delete(piece.key).catch(() => undefined);
};
