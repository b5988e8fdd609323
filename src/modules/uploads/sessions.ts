import type { Logger } from 'pino';
import { invalidState, isDomainError } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { ObjectInfo, ObjectStore } from '../../infra/storage/object-store.ts';
import { idBeside } from '../../lib/ids.ts';
import * as files from '../files/repo.ts';
import { commitFile } from '../ingest/commit.ts';
import {
  type ContentOutcome,
  commitContentParts,
  commitStoredContent,
  failContent,
  tagWrittenFile,
} from '../ingest/content-commit.ts';
import type { WriteGuard } from '../ingest/intake.ts';
import { claimKey } from '../ingest/key-claim.ts';
import type { Project } from '../projects/schemas.ts';
import { markReleased, renewCompleting, type SessionRow, setSessionStatus } from './session-repo.ts';

/** Why an upload whose write was refused at completion (its condition no longer held) failed. */
const REFUSED = 'write_refused';

/** Why a new file whose S3 completion a newer write at its key overtook failed, as new content so overtaken does. */
const SUPERSEDED = 'superseded';

/** Why a new file whose S3 completion became new content of the file an older write recorded at its key failed. */
const MERGED = 'merged';

/**
 * Fails the new file of `session`, still uploading, with `changes` (its failure reason): its assembled
 * object retired and the file marked collected, as it holds no bytes any more.
 */
async function failNewFile(
  q: Queryable,
  session: SessionRow,
  changes: { failure_reason: string; etag?: string },
): Promise<files.FileRow | undefined> {
  const file = await files.transitionFile(q, session.project_id, session.file_id, 'uploading', 'failed', {
    ...changes,
    upload_expires_at: null,
  });
  await files.retireObject(q, session.project_id, session.storage_key);
  await files.markFailedUploadCollected(q, session.file_id);
  return file;
}

/**
 * A completion that made new content: the file, with the ETag of the bytes just completed, and the
 * tags the session's writer named, as a PutObject over the file gives them.
 */
async function contentSettled(q: Queryable, session: SessionRow, made: ContentOutcome) {
  const outcome = await tagWrittenFile(q, made, session.tags ?? undefined);
  // The ETag of the bytes just completed, which S3 answers even while they wait for their scan.
  return {
    file: { ...outcome.file, etag: outcome.etag },
    superseded: outcome.status === 'superseded',
    contentId: outcome.version_id,
  };
}

/**
 * How a multipart session ends, for the REST multipart service and the reaper alike: settled into
 * its file through the upload core, discarded with its file failed, its parts released.
 */
export function createSessionLifecycle(deps: {
  db: Db;
  store: ObjectStore;
  leaseSeconds: number;
  logger: Logger;
  metrics?: Metrics;
}) {
  const { db, store, leaseSeconds, logger, metrics } = deps;

  /**
   * Discards the parts of an ended session in the store. A store that fails now does not undo the
   * abort: the reaper tries again (sessions ended without their parts released). A file that failed
   * with its upload then holds no bytes: it is marked collected, so it stops counting against quotas.
   */
  async function release(session: SessionRow): Promise<void> {
    try {
      await store.abortMultipart(session.storage_key, session.store_upload_id);
      await db.tx(async (q) => {
        await markReleased(q, session.id);
        if (session.content_id === null) await files.markFailedUploadCollected(q, session.file_id);
      });
    } catch (error) {
      logger.warn(
        { err: error, upload_id: session.id },
        'parts of an ended multipart upload not released yet',
      );
    }
  }

  /**
   * Ends a session whose assembled object its write's guard refused, or whose conditional complete
   * the reaper finds unsettled: the new content fails (and is collected as rejected content is), or
   * the file fails and its object is retired, to be collected.
   */
  async function refuse(session: SessionRow): Promise<void> {
    await db.tx(async (q) => {
      if (!(await setSessionStatus(q, session.id, 'completing', 'aborted'))) return;
      // Assembled: the store holds no parts of it any more.
      await markReleased(q, session.id);
      if (session.content_id !== null) {
        await failContent(q, session.content_id, REFUSED);
        return;
      }
      await failNewFile(q, session, { failure_reason: REFUSED });
    });
  }

  /**
   * Ends a session whose new file a newer write at its key overtook: answered as completed (S3's last
   * writer wins), but the file fails (`superseded`) and its object is retired, to be collected.
   */
  async function supersede(q: Queryable, session: SessionRow, sealed: ObjectInfo): Promise<files.FileRow> {
    const file = await failNewFile(q, session, { failure_reason: SUPERSEDED, etag: sealed.etag });
    if (!file) throw invalidState('The file is no longer uploading');
    return file;
  }

  /**
   * Makes the object a session assembled for its new file new content of `holder` (locked, see
   * claimKey), the file an older write recorded at the upload's key since the upload began, so that the key keeps one file, as had
   * the upload been made over it: the metadata and headers it was created with (its metadata only
   * when it was given some) go with the content. The session's own file fails (`merged`) and, its
   * object now the content's, holds no bytes.
   */
  async function merge(
    q: Queryable,
    session: SessionRow,
    project: Project,
    holder: files.FileRow,
    sealed: ObjectInfo,
  ): Promise<ContentOutcome> {
    const own = await files.transitionFile(q, session.project_id, session.file_id, 'uploading', 'failed', {
      failure_reason: MERGED,
      upload_expires_at: null,
    });
    if (!own) throw invalidState('The file is no longer uploading');
    await files.markFailedUploadCollected(q, own.id);
    const content = {
      // In the upload's place in time: a write to the file begun after it and committed first wins.
      id: idBeside('ver', session.file_id),
      storageKey: session.storage_key,
      size: sealed.size,
      contentType: own.content_type,
      expiresAt: new Date(),
      metadata: Object.keys(own.metadata).length > 0 ? own.metadata : undefined,
      httpHeaders: own.http_headers ?? undefined,
    };
    return commitStoredContent(q, project, holder, content, sealed);
  }

  return {
    release,
    refuse,

    /**
     * Records the assembled object as the file's content, or as its new content when the session made
     * one (session `completing` → `completed`). When the file moved on meanwhile (deleted), the session
     * ends `aborted` and the object goes with the file. `guard` runs first in that transaction: when it
     * refuses, the session ends `aborted` too, and the object is collected. `superseded`: the new
     * content was not kept, a newer write to the file having committed first. `holder`, for the new
     * file of an upload at an S3 key: the file the key shows the caller now, read with the key held
     * and weighed by claimKey: a newer one supersedes the upload; an older ready one recorded since
     * the upload began takes the object as its new content, and the session's own file fails
     * (`merged`). New content takes the tags the session's writer named, if any, in the same
     * transaction. `contentId`: the new content the object became, if any.
     */
    async settle(
      session: SessionRow,
      project: Project,
      sealed: ObjectInfo,
      guard?: WriteGuard,
      holder?: (q: Queryable) => Promise<files.FileRow | undefined>,
    ): Promise<{ file: files.FileRow; superseded: boolean; contentId: string | null }> {
      let refused = false;
      try {
        const settled = await db.tx(async (q) => {
          await guard?.(q).catch((error: unknown) => {
            refused = true;
            throw error;
          });
          if (!(await setSessionStatus(q, session.id, 'completing', 'completed'))) {
            throw invalidState('The multipart upload is no longer completing');
          }
          if (session.content_id !== null) {
            const outcome = await commitContentParts(q, project, session.file_id, session.content_id, sealed);
            return contentSettled(q, session, outcome);
          }
          const claim = await claimKey(q, project, await holder?.(q), session.file_id);
          if (claim.kind === 'overtaken') {
            return { file: await supersede(q, session, sealed), superseded: true, contentId: null };
          }
          if (claim.kind === 'into') {
            return contentSettled(q, session, await merge(q, session, project, claim.file, sealed));
          }
          const size = session.size_deferred ? sealed.size : undefined;
          const file = await commitFile(q, project, session.file_id, sealed, size);
          return { file, superseded: false, contentId: null };
        });
        metrics?.uploads.inc({ outcome: 'completed' });
        return settled;
      } catch (error) {
        if (refused) await refuse(session);
        else if (isDomainError(error, 'INVALID_STATE'))
          await setSessionStatus(db, session.id, 'completing', 'aborted');
        throw error;
      }
    },

    /** Puts a session back from `completing` to `open`, for another complete. */
    reopen: (session: SessionRow) => setSessionStatus(db, session.id, 'completing', 'open'),

    /** Ends an open session, its file failed and its parts released; false when it was not open. */
    async discard(session: SessionRow, to: 'aborted' | 'expired'): Promise<boolean> {
      const done = await db.tx(async (q) => {
        if (!(await setSessionStatus(q, session.id, 'open', to))) return false;
        const reason = to === 'aborted' ? 'upload_aborted' : 'upload_expired';
        if (session.content_id !== null) await failContent(q, session.content_id, reason);
        else {
          await files.transitionFile(q, session.project_id, session.file_id, 'uploading', 'failed', {
            failure_reason: reason,
            upload_expires_at: null,
          });
        }
        return true;
      });
      if (done) {
        metrics?.uploads.inc({ outcome: to });
        await release(session);
      }
      return done;
    },

    /**
     * Keeps the claim of a session being assembled (its completing_since) fresh every third of a job
     * lease, however long the store takes; returns the function that stops it.
     */
    holdCompleting(id: string): () => void {
      const timer = setInterval(
        () => void renewCompleting(db, id).catch(() => undefined),
        (leaseSeconds * 1000) / 3,
      );
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

export type SessionLifecycle = ReturnType<typeof createSessionLifecycle>;
