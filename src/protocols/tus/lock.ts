import { randomUUID } from 'node:crypto';
import type { Db } from '../../infra/db.ts';
import { uploadLocked } from './protocol.ts';
import { acquireLock, releaseLock, releaseStalled, renewLock, type TusUploadRow } from './upload-repo.ts';

/** How often a PATCH renews its lock, and notes whether its bytes moved. */
const RENEW_MS = 1000;
/** A lock not renewed this long belongs to a process that died. */
const LEASE_SECONDS = 10;
/** A PATCH that received no byte this long is stalled: a new HEAD or PATCH of its upload takes over. */
export const STALL_SECONDS = 3;
/** How long a PATCH waits for a busy upload before it answers 423. */
const WAIT_MS = (STALL_SECONDS + 1) * 1000;
const POLL_MS = 200;

/** A PATCH's hold on its upload, across every node (the lock is a row in the database). */
export interface UploadLock {
  /** The upload as it was when the lock was taken. */
  upload: TusUploadRow;
  id: string;
  /** Marks that bytes arrived (or that the client is no longer waited on). */
  progressed(): void;
  /** No more bytes are awaited: the lock stays fresh until released, however long the store takes. */
  receivedAll(): void;
  release(): Promise<void>;
}

/**
 * Takes the lock of upload `uploadId`, waiting a few seconds for a stalled holder to be overtaken;
 * 423 when another PATCH is still receiving bytes. `onLost` runs when the lock is taken away.
 */
export async function lockUpload(db: Db, uploadId: string, onLost: () => void): Promise<UploadLock> {
  const id = randomUUID();
  const deadline = Date.now() + WAIT_MS;
  let upload = await acquireLock(db, uploadId, id, LEASE_SECONDS, STALL_SECONDS);
  while (!upload) {
    if (Date.now() >= deadline) throw uploadLocked();
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    upload = await acquireLock(db, uploadId, id, LEASE_SECONDS, STALL_SECONDS);
  }
  let moved = false;
  let waiting = true;
  const timer = setInterval(() => {
    const progressed = moved || !waiting;
    moved = false;
    renewLock(db, uploadId, id, progressed).then(
      (held) => {
        if (!held) {
          clearInterval(timer);
          onLost();
        }
      },
      () => undefined,
    );
  }, RENEW_MS);
  timer.unref();
  return {
    upload,
    id,
    progressed: () => {
      moved = true;
    },
    receivedAll: () => {
      waiting = false;
    },
    async release() {
      clearInterval(timer);
      await releaseLock(db, uploadId, id);
    },
  };
}

/** A HEAD's part: a PATCH nobody feeds any more is released, so that the offset it answers stands. */
export const releaseStalledPatch = (db: Db, uploadId: string) => releaseStalled(db, uploadId, STALL_SECONDS);
