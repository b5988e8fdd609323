import type { MultipartService } from '../../modules/uploads/multipart.ts';
import type { SessionRow } from '../../modules/uploads/session-repo.ts';

/**
 * The expiry of an upload a PATCH is writing. An upload expires after a time without progress, and
 * bytes arriving are progress: the expiry moves on while they do (at most once a step, as `prolong`
 * writes it), not only once the PATCH ends, so that a PATCH longer than the expiry keeps its upload.
 */
export function expiryWhileWriting(multipart: MultipartService, session: SessionRow) {
  let current = session;
  let moving: Promise<void> | undefined;
  const move = async () => {
    current = { ...current, expires_at: await multipart.prolong(current) };
  };
  return {
    /** Bytes arrived: the expiry moves, one move at a time. One that fails is the PATCH's to meet. */
    progressed(): void {
      moving ??= move()
        .catch(() => undefined)
        .finally(() => {
          moving = undefined;
        });
    },
    /** The PATCH stored its bytes: the expiry moves a last time, and is answered. */
    async settle(): Promise<Date> {
      await moving;
      await move();
      return current.expires_at;
    },
  };
}
