import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import { invalidState } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import * as files from '../files/repo.ts';
import type { IngestService } from '../ingest/service.ts';
import type { ProjectService } from '../projects/service.ts';
import { createMultipartCompletion } from './multipart-completion.ts';
import { createMultipartParts } from './multipart-parts.ts';
import { createMultipartReaper } from './multipart-reaper.ts';
import { createMultipartStart } from './multipart-start.ts';
import { createSessionAccess } from './session-access.ts';
import { extendSession, openUploads, type SessionAndFile, type SessionRow } from './session-repo.ts';
import { createSessionLifecycle } from './sessions.ts';

/** How much later an upload's expiry must move before prolong writes it. */
const PROLONG_STEP_MS = 60_000;

/**
 * The multipart upload service (REST multipart, and the parts of S3's and tus's uploads): started
 * (multipart-start), its parts received (multipart-parts), completed or aborted
 * (multipart-completion), kept open while it progresses, and reaped (multipart-reaper).
 */
export function createMultipartService(deps: {
  config: Config;
  db: Db;
  store: ObjectStore;
  ingest: IngestService;
  projects: ProjectService;
  logger: Logger;
  metrics?: Metrics;
}) {
  const { config, db, store, ingest, projects, logger, metrics } = deps;
  const sessions = createSessionLifecycle({
    db,
    store,
    leaseSeconds: config.jobLeaseSeconds,
    logger,
    metrics,
  });
  const access = createSessionAccess(db);
  const { statusOf, visible } = access;

  const reap = createMultipartReaper({
    db,
    store,
    projects,
    sessions,
    leaseSeconds: config.jobLeaseSeconds,
    logger,
  });

  return {
    ...createMultipartStart({ config, store, ingest }),

    /**
     * The caller's session, its status as of now, and its file (404 as for every other call), from
     * the session and its file as read with SESSION_AND_FILE_COLUMNS (by a protocol, with its own row).
     */
    visibleSession(caller: Caller, found: SessionAndFile | undefined) {
      const { session, file } = visible(caller, found);
      return { session, file, status: statusOf(session) };
    },

    /**
     * Keeps an open upload that made progress open for another COFFER_MULTIPART_EXPIRY_SECONDS (a
     * protocol whose uploads expire without progress, as tus's do), its file's upload with it. Within
     * a minute (or a tenth of the expiry) of the last extension, the expiry stands: an upload in many
     * small requests writes it once a minute at most.
     */
    async prolong(session: SessionRow): Promise<Date> {
      const expiresAt = new Date(Date.now() + config.multipartExpirySeconds * 1000);
      const step = Math.min(PROLONG_STEP_MS, config.multipartExpirySeconds * 100);
      if (expiresAt.getTime() - session.expires_at.getTime() < step) return session.expires_at;
      await db.tx(async (q) => {
        if (!(await extendSession(q, session.id, expiresAt)))
          throw invalidState('The upload is no longer open');
        await files.updateFile(q, session.project_id, session.file_id, { upload_expires_at: expiresAt });
      });
      return expiresAt;
    },

    /** Open uploads of the caller's project by their file's key (S3's ListMultipartUploads). */
    listOpen(caller: Caller, range: Parameters<typeof openUploads>[2], limit: number) {
      return openUploads(db, caller.project.id, range, limit);
    },

    ...createMultipartParts({ config, db, store, ingest, access }),

    ...createMultipartCompletion({ db, store, sessions, access }),

    /** Aborts sessions left open past COFFER_MULTIPART_EXPIRY_SECONDS and removes their parts. */
    reap,
  };
}

export type MultipartService = ReturnType<typeof createMultipartService>;
