import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Db } from '../../infra/db.ts';
import { uploadLocked } from './protocol.ts';
import {
  acquireLock,
  announceRelease,
  askRelease,
  type LockTimes,
  releaseLock,
  renewLock,
  type TusUploadRow,
} from './upload-repo.ts';

/** How often a PATCH renews its lock, and notes whether its bytes moved. */
const RENEW_MS = 1000;
/** A PATCH that received no byte this long is stalled: a new HEAD or PATCH of its upload takes over. */
export const STALL_SECONDS = 3;
/**
 * How long a stalled PATCH asked to let go of its upload has to do it: it hears of it at its next
 * renewal, then stores what it received of its part in flight (the store reading them counts as
 * progress). One whose store stays silent that long, or that stopped renewing for as long (its process
 * is gone), is taken over, and its bytes of the part in flight are lost. One whose body was cut and
 * that lets go of its own accord is never stalled while it renews: only its process's end frees it.
 */
const HANDOVER_SECONDS = 3;
const TIMES: LockTimes = {
  stall: STALL_SECONDS,
  silent: HANDOVER_SECONDS,
  handover: HANDOVER_SECONDS,
};
/** How long a PATCH waits for a busy upload before it answers 423: a stall, then a handover. */
const WAIT_MS = (STALL_SECONDS + HANDOVER_SECONDS + 1) * 1000;
const POLL_MS = 200;

/**
 * How a PATCH's body ends when a new request of its upload asked it to let go: as a dropped
 * connection does, so that what it received of its part in flight is stored and the upload released.
 * (One whose link is taken for dead is ended by the server: http/idle-bodies.ts.)
 */
export class LetGo extends Error {}

/** A PATCH's hold on its upload, across every node (the lock is a row in the database). */
export interface UploadLock {
  /** The upload as it was when the lock was taken. */
  upload: TusUploadRow;
  id: string;
  /** Stops renewing it; `held` false when the holder's last write released it already. */
  release(held?: boolean): Promise<void>;
  /** Says it will release the upload once it stored what it received (its body was cut). */
  lettingGo(): Promise<void>;
}

/** The bytes a PATCH receives: its body, and how many bytes its connection has read so far. */
export interface Incoming {
  stream: Readable;
  received(): number;
  /** Whether the whole body arrived, read or not yet (one without bytes at once): its client sent all it had. */
  arrived(): boolean;
}

/**
 * Takes the lock of upload `uploadId` for a PATCH receiving `incoming`, waiting a few seconds for a
 * stalled holder to let go; 423 when another PATCH is still receiving bytes. The lock is renewed while
 * bytes arrive (and, once they all have, while the store works), `progressed` called each time they
 * did. Taken away, it ends the body; asked to let go (by askRelease), it ends the body as a dropped
 * connection does, and the PATCH stores what it received before it releases the lock.
 */
export async function lockUpload(
  db: Db,
  uploadId: string,
  incoming: Incoming,
  progressed?: () => void,
): Promise<UploadLock> {
  const id = randomUUID();
  const deadline = Date.now() + WAIT_MS;
  let upload = await acquireLock(db, uploadId, id);
  while (!upload) {
    if (Date.now() >= deadline) throw uploadLocked();
    // A holder past asking is freed at once: its lock is taken without waiting.
    if ((await askRelease(db, uploadId, TIMES)) !== 'freed') {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    upload = await acquireLock(db, uploadId, id);
  }
  let seen = incoming.received();
  let lettingGo = false;
  const timer = setInterval(() => {
    const now = incoming.received();
    // Once the body arrived whole, the PATCH waits for nothing from its client; once it was cut, it
    // stores what it received and lets go: neither is stalled while it renews (only a dead process is).
    const moved = now !== seen || incoming.arrived() || lettingGo;
    seen = now;
    if (moved) progressed?.();
    renewLock(db, uploadId, id, moved).then(
      (state) => {
        if (!state) {
          clearInterval(timer);
          incoming.stream.destroy(uploadLocked());
        } else if (state === 'asked' && !incoming.stream.destroyed && !incoming.arrived()) {
          // Ended as a cut, unless it arrived whole.
          incoming.stream.destroy(new LetGo('A new request of the upload took it over'));
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
    lettingGo() {
      lettingGo = true;
      return announceRelease(db, uploadId, id);
    },
  };
}

/**
 * A HEAD's part: a PATCH nobody feeds any more is asked to let go, and waited for while it stores what
 * it received, so that the offset HEAD answers stands and counts those bytes. Whether there was one
 * (the upload is then to be read again).
 */
export async function letStalledPatchGo(db: Db, uploadId: string): Promise<boolean> {
  const deadline = Date.now() + (HANDOVER_SECONDS + 2) * 1000;
  let state = await askRelease(db, uploadId, TIMES);
  const found = state !== undefined;
  while (state === 'asked' && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS / 2));
    state = await askRelease(db, uploadId, TIMES);
  }
  return found;
}
