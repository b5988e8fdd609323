import type { Logger } from 'pino';
import type { Db, Queryable } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { visibleAtKeyOf } from '../files/service.ts';
import type { ProjectService } from '../projects/service.ts';
import { expiredSessions, stuckSessions, unreleasedSessions } from './session-repo.ts';
import type { SessionLifecycle } from './sessions.ts';

/**
 * The reaper of the multipart sessions nobody will finish: left `completing` by a process that died,
 * open past their expiry, or ended with their parts still in the store. Answers `reap`.
 */
export function createMultipartReaper(deps: {
  db: Db;
  store: ObjectStore;
  projects: ProjectService;
  sessions: SessionLifecycle;
  leaseSeconds: number;
  logger: Logger;
}): () => Promise<number> {
  const { db, store, projects, sessions, leaseSeconds, logger } = deps;

  /**
   * A session left `completing` by a process that died during assembly (its claim not renewed for a
   * lease): finished when its object was stored (the file then moves on exactly as complete would
   * have done), reopened otherwise. A conditional complete's object is refused instead: its
   * condition lived in the request, and its client was answered an error.
   */
  async function recoverStuck(): Promise<void> {
    for (const session of await stuckSessions(db, leaseSeconds)) {
      try {
        const object = await store.head(session.storage_key);
        const project = await projects.getProject(session.project_id);
        if (!object || !project) {
          await sessions.reopen(session);
          continue;
        }
        if (session.conditional) {
          await sessions.refuse(session);
          logger.info({ upload_id: session.id }, 'conditional multipart upload left completing was aborted');
          continue;
        }
        // Made at an S3 key, it keeps the key to one file as its complete would have.
        const holder = session.keyed
          ? (q: Queryable) => visibleAtKeyOf(q, session.project_id, session.file_id)
          : undefined;
        await sessions.settle(session, project, object, undefined, holder);
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
    let count = 0;
    for (const session of await expiredSessions(db)) if (await sessions.discard(session, 'expired')) count++;
    if (count > 0) logger.info({ sessions: count }, 'expired multipart uploads aborted');
    for (const session of await unreleasedSessions(db)) await sessions.release(session);
    return count;
  };
}
