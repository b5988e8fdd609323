import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import type { Project } from '../projects/schemas.ts';
import type { ProjectService } from '../projects/service.ts';
import type { SessionRow } from './multipart.ts';

/** How the multipart service reads and ends sessions, for the reaper to do the same. */
export interface ReapedSessions {
  /** The sessions `where` selects: an SQL condition on `multipart_sessions s`, then any ORDER BY and LIMIT. */
  select(where: string, params?: unknown[]): Promise<SessionRow[]>;
  /** Records the assembled object as the file's content (`completing` → `completed`). */
  settle(session: SessionRow, project: Project, sha256: string | null): Promise<unknown>;
  /** Puts a session back from `completing` to `open`, for another complete. */
  reopen(session: SessionRow): Promise<unknown>;
  /** Ends an open session as expired, its file failed and its parts released; false when it was not open. */
  expire(session: SessionRow): Promise<boolean>;
  /** Discards the parts of an ended session in the store (logged, not thrown, when the store fails). */
  release(session: SessionRow): Promise<void>;
}

/**
 * The reaper of the multipart sessions nobody will finish: left `completing` by a process that died,
 * open past their expiry, or ended with their parts still in the store. Answers `reap`.
 */
export function createMultipartReaper(
  deps: { config: Config; store: ObjectStore; projects: ProjectService; logger: Logger },
  sessions: ReapedSessions,
): () => Promise<number> {
  const { config, store, projects, logger } = deps;

  /**
   * A session left `completing` by a process that died during assembly (its claim not renewed for a
   * lease): finished when its object was stored (the file then moves on exactly as complete would
   * have done), reopened otherwise.
   */
  async function recoverStuck(): Promise<void> {
    const stuck = await sessions.select(
      `status = 'completing' AND completing_since < now() - make_interval(secs => $1) LIMIT 100`,
      [config.jobLeaseSeconds],
    );
    for (const session of stuck) {
      try {
        const object = await store.head(session.storage_key);
        const project = await projects.getProject(session.project_id);
        if (!object || !project) {
          await sessions.reopen(session);
          continue;
        }
        await sessions.settle(session, project, object.sha256 ?? null);
        logger.info({ upload_id: session.id }, 'multipart upload left completing was finished');
      } catch (error) {
        // One session that cannot be settled must not hold back the others (nor the reaper).
        logger.warn({ err: error, upload_id: session.id }, 'multipart upload left completing not recovered');
      }
    }
  }

  /** One pass: answers how many open sessions it expired. */
  return async function reap(): Promise<number> {
    await recoverStuck();
    const expired = await sessions.select(
      // A file under legal hold keeps its parts (its session stays expired) until the hold is released.
      `status = 'open' AND expires_at <= now()
         AND NOT EXISTS (SELECT 1 FROM files f WHERE f.id = s.file_id AND f.legal_hold)
       ORDER BY expires_at LIMIT 100`,
    );
    let count = 0;
    for (const session of expired) if (await sessions.expire(session)) count++;
    if (count > 0) logger.info({ sessions: count }, 'expired multipart uploads aborted');
    const unreleased = await sessions.select(
      `status IN ('aborted', 'expired') AND store_released_at IS NULL
         AND finished_at < now() - interval '1 minute'
       ORDER BY finished_at LIMIT 100`,
    );
    for (const session of unreleased) await sessions.release(session);
    return count;
  };
}
