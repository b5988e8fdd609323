import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
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
  /** Stops renewing it; `held` false when the holder's last write released it already. */
  release(held?: boolean): Promise<void>;
}

/** The bytes a PATCH receives: its body, and how many bytes its connection has read so far. */
export interface Incoming {
  stream: Readable;
  received(): number;
}

/**
 * Takes the lock of upload `uploadId` for a PATCH receiving `incoming`, waiting a few seconds for a
 * stalled holder to be overtaken; 423 when another PATCH is still receiving bytes. The lock is renewed
 * while bytes arrive (and, once they all have, while the store works), `progressed` called each time
 * they did; taken away, it ends the body.
 */
export async function lockUpload(
  db: Db,
  uploadId: string,
  incoming: Incoming,
  progressed?: () => void,
): Promise<UploadLock> {
  const id = randomUUID();
  const deadline = Date.now() + WAIT_MS;
  let upload = await acquireLock(db, uploadId, id, LEASE_SECONDS, STALL_SECONDS);
  while (!upload) {
    if (Date.now() >= deadline) throw uploadLocked();
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    upload = await acquireLock(db, uploadId, id, LEASE_SECONDS, STALL_SECONDS);
  }
  let seen = incoming.received();
  const timer = setInterval(() => {
    const now = incoming.received();
    const moved = now !== seen || incoming.stream.readableEnded;
    seen = now;
    if (moved) progressed?.();
    renewLock(db, uploadId, id, moved).then(
      (held) => {
        if (!held) {
          clearInterval(timer);
          incoming.stream.destroy(uploadLocked());
        }
      },
      () => undefined,
    );
  }, RENEW_MS);
  timer.unref();
  return {
    upload,
    id,
    async release(held = true) {
      clearInterval(timer);
      if (held) await releaseLock(db, uploadId, id);
    },
  };
}

/** A HEAD's part: a PATCH nobody feeds any more is released, so that the offset it answers stands. */
export const releaseStalledPatch = (db: Db, uploadId: string) => releaseStalled(db, uploadId, STALL_SECONDS);
