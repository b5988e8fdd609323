import type { Queryable } from '../../infra/db.ts';
import { recordEvent } from '../events/repo.ts';
import * as files from '../files/repo.ts';
import type { Project } from '../projects/schemas.ts';

/**
 * What a write at an S3 key does, as it commits, with the file the key shows:
 * - `overtaken`: a newer write made a file there first; this one is not kept (S3's last writer wins);
 * - `into`: an older ready file, locked as every commit of new content locks it: the write's bytes
 *   become its new content, as had the write been sent over it;
 * - `free`: the write's bytes are a file of their own.
 */
export type KeyClaim = { kind: 'overtaken' } | { kind: 'into'; file: files.FileRow } | { kind: 'free' };

/**
 * Claims the key for a write begun as the file `ownId` (ids are in creation order, the order in which
 * a key shows its files), in the write's transaction: `holder` is the file the key shows the caller,
 * read with the key held (see heldAt). A holder deleted since it was read leaves the key free. An older
 * one still being scanned, never readable yet, is replaced: deleted (file.deleted) in this transaction,
 * so that the key keeps one file, as a PUT over an object replaces it; under a legal hold it stays, and
 * the write makes a file of its own, which the key shows over it.
 */
export async function claimKey(
  q: Queryable,
  project: Project,
  holder: files.FileRow | undefined,
  ownId: string,
): Promise<KeyClaim> {
  if (!holder) return { kind: 'free' };
  if (holder.id > ownId) return { kind: 'overtaken' };
  const file = await files.findFile(q, project.id, holder.id, true);
  if (!file || file.deleted_at !== null) return { kind: 'free' };
  if (file.status === 'ready') return { kind: 'into', file };
  if (file.status === 'processing' && !file.legal_hold) {
    const deleted = await files.transitionFile(q, project.id, file.id, 'processing', 'deleted');
    await recordEvent(q, project, 'file.deleted', deleted!);
  }
  return { kind: 'free' };
}
