import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import { fileTooLarge, invalidState, notFound, partsTooLarge, validationError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import type { Metrics } from '../../infra/metrics.ts';
import {
  isStoreError,
  MAX_PART_NUMBER,
  MIN_PART_SIZE,
  type ObjectStore,
  type PartInfo,
  STORED_PER_DECLARED_BYTE,
} from '../../infra/storage/object-store.ts';
import { bareEtag } from '../../lib/etag.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { newId } from '../../lib/ids.ts';
import * as files from '../files/repo.ts';
import { urlLifetimeSeconds, visibleAt, visibleFile } from '../files/service.ts';
import type { ContentRequest } from '../ingest/content.ts';
import { findContent } from '../ingest/content-repo.ts';
import type { ByteSource, UploadRequest, WriteGuard } from '../ingest/intake.ts';
import type { TypeField } from '../ingest/rules.ts';
import type { IngestService } from '../ingest/service.ts';
import type { ProjectService } from '../projects/service.ts';
import { createMultipartReaper } from './multipart-reaper.ts';
import {
  claimCompleting,
  extendSession,
  findSessionAndFile,
  grantOpenPart,
  insertSession,
  lockGrants,
  openUploads,
  recordGrant,
  type SessionAndFile,
  type SessionRow,
} from './session-repo.ts';
import { createSessionLifecycle } from './sessions.ts';

/** How much later an upload's expiry must move before prolong writes it. */
const PROLONG_STEP_MS = 60_000;

function checkPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
    throw validationError(`part must run from 1 to ${MAX_PART_NUMBER}`, { field: 'part' });
  }
}

/** Checks the client's part list against what the store holds; every failure names the part. */
export function checkParts(
  listed: { part_number: number; etag: string }[],
  stored: PartInfo[],
  expected: number | { atMost: number },
): void {
  if (listed.length === 0) throw validationError('parts must list at least one part', { field: 'parts' });
  // The whole list's order first, as S3 checks it: a list out of order is refused as such, whatever its parts.
  listed.forEach((part, index) => {
    const previous = listed[index - 1];
    if (previous && part.part_number <= previous.part_number) {
      throw validationError(
        `Part ${part.part_number} is out of order or repeated: list parts ascending and unique`,
        {
          field: `parts.${index}`,
          part_number: part.part_number,
          previous_part_number: previous.part_number,
        },
      );
    }
  });
  const byNumber = new Map(stored.map((part) => [part.partNumber, part]));
  let total = 0;
  listed.forEach((part, index) => {
    const field = `parts.${index}`;
    const found = byNumber.get(part.part_number);
    if (!found) {
      throw validationError(`Part ${part.part_number} was not uploaded`, {
        field,
        part_number: part.part_number,
      });
    }
    if (bareEtag(found.etag) !== bareEtag(part.etag)) {
      throw validationError(`The ETag of part ${part.part_number} does not match the uploaded part`, {
        field,
        part_number: part.part_number,
      });
    }
    if (index < listed.length - 1 && found.size < MIN_PART_SIZE) {
      throw validationError(`Part ${part.part_number} is smaller than 5 MiB and is not the last part`, {
        field,
        part_number: part.part_number,
        size_bytes: found.size,
        min_size_bytes: MIN_PART_SIZE,
      });
    }
    total += found.size;
  });
  if (typeof expected === 'object') {
    if (total > expected.atMost) throw fileTooLarge(expected.atMost, 'project', 'parts');
    return;
  }
  if (total !== expected) {
    throw validationError(`The parts hold ${total} bytes, not the declared total_size_bytes ${expected}`, {
      field: 'parts',
      parts_size_bytes: total,
      total_size_bytes: expected,
    });
  }
}

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

  /** A session's status as of now: one open past its expiry is expired even before the reaper ran. */
  const statusOf = (session: SessionRow) =>
    session.status === 'open' && session.expires_at <= new Date() ? 'expired' : session.status;

  /**
   * The caller's open-or-not session and its file; 404 when unknown, of another project, or of a
   * token of another owner (a replacement token of the same owner may continue it, as the contract says).
   * With `key` (S3, which names an upload by its key and its id), also 404 for an upload of a file
   * at another key.
   */
  async function load(caller: Caller, uploadId: string, key?: string) {
    const found = await findSessionAndFile(db, caller.project.id, uploadId);
    if (key !== undefined && found?.key !== key) throw notFound('Multipart upload');
    return visible(caller, found);
  }

  /** load's checks of a session and its file as read (by findSessionAndFile, or with its columns). */
  function visible(caller: Caller, found: SessionAndFile | undefined) {
    if (!found) throw notFound('Multipart upload');
    const file = visibleFile(caller, found.file, { ofSameOwner: true });
    return { session: found.session, file };
  }

  /** The type the upload's bytes declare: its new content's, or its file's. */
  async function typeOf(session: SessionRow, file: files.FileRow): Promise<string> {
    if (session.content_id === null) return file.content_type;
    return (await findContent(db, file.id, session.content_id))?.content_type ?? file.content_type;
  }

  /** Only an open session takes parts or completes; one past its expiry is expired even before the reaper ran. */
  function requireOpen(session: SessionRow): void {
    const status = statusOf(session);
    if (status !== 'open') throw invalidState(`The multipart upload is ${status}`, { status });
  }

  /**
   * Records that part `partNumber` may be sent with `size` bytes. A part number's URLs can store at
   * most its largest grant, so the grants bound what the session can ever hold in the store: no
   * more than twice its total (room for parts cut again), checked one grant at a time per session.
   */
  async function grant(session: SessionRow, partNumber: number, size: number): Promise<void> {
    if (size > session.total_size_bytes) {
      throw validationError(`A part cannot hold more than the upload's ${session.total_size_bytes} bytes`, {
        field: 'size',
        total_size_bytes: session.total_size_bytes,
      });
    }
    await db.tx(async (q) => {
      const { grants, open } = await lockGrants(q, session.id);
      // Read open before the lock: an abort, a complete or the expiry may have come between.
      if (!open) throw invalidState('The multipart upload is no longer open');
      if (size <= (grants[partNumber] ?? 0)) return;
      let others = 0;
      for (const [number, bytes] of Object.entries(grants))
        if (Number(number) !== partNumber) others += bytes;
      const limit = STORED_PER_DECLARED_BYTE * session.total_size_bytes;
      if (others + size > limit) {
        throw partsTooLarge(others + size, session.total_size_bytes, limit, others);
      }
      await recordGrant(q, session.id, partNumber, size);
    });
  }

  /**
   * grant for a part about to be stored, the usual case in one statement (no transaction holding the
   * session's row while parts of the same upload wait for it); a refusal is told by reading the
   * session again and granting as grant does.
   */
  async function grantPart(caller: Caller, session: SessionRow, partNumber: number, size: number) {
    if (await grantOpenPart(db, session.id, partNumber, size, STORED_PER_DECLARED_BYTE)) return;
    const { session: current } = await load(caller, session.id);
    requireOpen(current);
    await grant(current, partNumber, size);
  }

  /**
   * The bytes of a multipart upload: the store's upload, made before the file is recorded, and its
   * session recorded with it. `sizeLimit` marks a deferred size (the session holds the limit, not a total).
   */
  function partsSource(expiresAt: Date, sizeLimit?: number): ByteSource<string, string> {
    return {
      make: (planned) =>
        store.createMultipart(planned.storageKey, {
          contentType: planned.contentType,
          totalSize: sizeLimit ?? planned.size,
        }),
      // Not recorded: the store's upload would have no session and never be reaped.
      undo: (storeUploadId, planned) => store.abortMultipart(planned.storageKey, storeUploadId),
      record: async (q, planned, storeUploadId) => {
        const id = newId('session');
        await insertSession(q, {
          id,
          project_id: planned.projectId,
          file_id: planned.fileId,
          content_id: planned.contentId ?? null,
          store_upload_id: storeUploadId,
          storage_key: planned.storageKey,
          total_size_bytes: sizeLimit ?? planned.size,
          size_deferred: sizeLimit !== undefined,
          expires_at: expiresAt,
        });
        return id;
      },
    };
  }

  const reap = createMultipartReaper({
    db,
    store,
    projects,
    sessions,
    leaseSeconds: config.jobLeaseSeconds,
    logger,
  });

  return {
    async start(caller: Caller, request: Omit<UploadRequest, 'size_bytes'> & { total_size_bytes: number }) {
      const expiresAt = new Date(Date.now() + config.multipartExpirySeconds * 1000);
      const { file, extra: uploadId } = await ingest.declare(
        caller,
        {
          ...request,
          size_bytes: request.total_size_bytes,
          size_field: request.size_field ?? 'total_size_bytes',
        },
        partsSource(expiresAt),
        { uploadExpiresAt: expiresAt },
      );
      return {
        upload_id: uploadId!,
        file_id: file.id,
        expires_at: expiresAt.toISOString(),
        min_part_size_bytes: MIN_PART_SIZE,
      };
    },

    /**
     * A multipart upload whose size is known only at completion (S3's CreateMultipartUpload): the
     * file is declared with 0 bytes, its parts held to the caller's size limit as they arrive, and
     * its size, with the quota, settled when it completes.
     */
    async startDeferred(caller: Caller, request: Omit<UploadRequest, 'size_bytes'>) {
      const expiresAt = new Date(Date.now() + config.multipartExpirySeconds * 1000);
      const limit = await ingest.sizeLimit(caller);
      const { file, extra: uploadId } = await ingest.declare(
        caller,
        { ...request, size_bytes: 0 },
        partsSource(expiresAt, limit),
        { uploadExpiresAt: expiresAt },
      );
      return { uploadId: uploadId!, file };
    },

    /**
     * startDeferred for new content of a ready file (an S3 multipart upload to a key that holds one):
     * the file keeps its content until the upload completes, then gets the new one as a PUT would give it.
     */
    async startContentDeferred(
      caller: Caller,
      file: files.FileRow,
      request: Omit<ContentRequest, 'size_bytes'>,
    ) {
      const expiresAt = new Date(Date.now() + config.multipartExpirySeconds * 1000);
      const limit = await ingest.sizeLimit(caller);
      const { extra: uploadId } = await ingest.declareContentParts(
        caller,
        file,
        request,
        partsSource(expiresAt, limit),
        expiresAt,
      );
      return { uploadId: uploadId! };
    },

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

    /**
     * Writes part `partNumber` of an open upload from a stream of exactly `size` bytes; answers its ETag
     * (with `md5: false`, what names the part for finish, maybe not its MD5: see ObjectStore.writePart).
     */
    async writePart(
      caller: Caller,
      uploadId: string,
      partNumber: number,
      body: Readable,
      size: number,
      options?: { md5?: boolean; key?: string; typeField?: TypeField },
    ) {
      const { session, file } = await load(caller, uploadId, options?.key);
      requireOpen(session);
      checkPartNumber(partNumber);
      await grantPart(caller, session, partNumber, size);
      // The first part holds the file's head: checked against its type like a single upload's.
      const bytes =
        partNumber === 1
          ? await ingest.screen(caller, await typeOf(session, file), file.filename, body, options?.typeField)
          : body;
      return store.writePart(session.storage_key, session.store_upload_id, partNumber, bytes, size, options);
    },

    /**
     * Starts receiving a part of `session`'s upload (of exactly `size` bytes) before its number is
     * known; `place` then checks that the session is still open and grants the part as writePart does
     * (the session and its file were loaded by the caller), and stores it (a failed check drops the
     * bytes). Not for a first part, whose head writePart checks against the file's type.
     */
    stagePart(session: SessionRow, body: Readable, size: number, options?: { md5?: boolean }) {
      const staged = store.stagePart(session.storage_key, session.store_upload_id, body, size, options);
      return {
        async place(caller: Caller, partNumber: number): Promise<string> {
          try {
            if (partNumber === 1) throw new Error('A first part is written by writePart');
            checkPartNumber(partNumber);
            await grantPart(caller, session, partNumber, size);
          } catch (error) {
            await staged.discard();
            throw error;
          }
          return staged.place(partNumber);
        },
        discard: () => staged.discard(),
      };
    },

    /**
     * A presigned PUT URL for one part; the caller's TTL unless the project requires signed URL
     * lifetimes. With `size`, the URL takes exactly that many bytes (required where the store signs sizes).
     */
    async partUrl(
      caller: Caller,
      uploadId: string,
      partNumber: number,
      ttl: number | undefined,
      size?: number,
    ) {
      const { session } = await load(caller, uploadId);
      requireOpen(session);
      checkPartNumber(partNumber);
      if (size === undefined && store.capabilities.partSizeRequired) {
        throw validationError('size is required: part URLs are signed for the exact size of the part', {
          field: 'size',
        });
      }
      if (size !== undefined) await grant(session, partNumber, size);
      const seconds = urlLifetimeSeconds(caller.project, ttl, config.uploadUrlTtlSeconds);
      const expiresAt = new Date(Date.now() + seconds * 1000);
      const url = await store.presignPart(session.storage_key, session.store_upload_id, partNumber, {
        expiresAt,
        size,
      });
      return { upload_id: session.id, part_number: partNumber, url, expires_at: expiresAt.toISOString() };
    },

    /** What is uploaded so far, so a client that crashed sends only the missing parts (`key`: see load). */
    async describe(caller: Caller, uploadId: string, key?: string) {
      const { session } = await load(caller, uploadId, key);
      const parts =
        session.status === 'open' ? await store.listParts(session.storage_key, session.store_upload_id) : [];
      return {
        upload_id: session.id,
        file_id: session.file_id,
        status: session.status,
        total_size_bytes: session.total_size_bytes,
        expires_at: session.expires_at.toISOString(),
        parts: parts.map((part) => ({
          part_number: part.partNumber,
          etag: part.etag,
          size_bytes: part.size,
        })),
      };
    },

    /** Validates the parts, assembles the object, then finishes the file exactly as confirm does. */
    async complete(caller: Caller, uploadId: string, parts: { part_number: number; etag: string }[]) {
      return files.toFileObject((await this.finish(caller, uploadId, parts)).file);
    },

    /**
     * complete, answering the file as recorded (its ETag too, for S3's answer) and the new content
     * the upload made of it, if any (`contentId`, its version's id, unless `superseded`: not kept, a
     * newer write having committed first, or, with `key`, a newer file showing at the key of the new
     * file it made; with `key` too, the new content of an older file recorded at the key since, see
     * sessions' settle); `guard` runs first in the transaction that records it (a refusal ends the
     * upload, its object collected); `key`: see load.
     */
    async finish(
      caller: Caller,
      uploadId: string,
      parts: { part_number: number; etag: string }[],
      { guard, key }: { guard?: WriteGuard; key?: string } = {},
    ): Promise<{ file: files.FileRow; contentId: string | null; superseded: boolean }> {
      const { session, file } = await load(caller, uploadId, key);
      requireOpen(session);
      if (session.content_id === null && file.status !== 'uploading') {
        throw invalidState(`The file is ${file.status}, not uploading`, { status: file.status });
      }
      const stored = await store.listParts(session.storage_key, session.store_upload_id).catch((error) => {
        // Aborted (or reaped) since it was loaded.
        if (isStoreError(error, 'NoSuchUpload')) throw invalidState('The multipart upload is no longer open');
        throw error;
      });
      checkParts(
        parts,
        stored,
        session.size_deferred ? { atMost: session.total_size_bytes } : session.total_size_bytes,
      );
      // Claims the session so that concurrent completes or aborts cannot interleave with assembly.
      if (!(await claimCompleting(db, session.id, guard !== undefined))) {
        throw invalidState('The multipart upload is already being completed or was aborted');
      }
      // With `key` (S3), a new file keeps its key to one file (see sessions' settle).
      const holder = key === undefined ? undefined : (q: Queryable) => visibleAt(q, caller, key);
      let object: Awaited<ReturnType<ObjectStore['completeMultipart']>>;
      const stopHolding = sessions.holdCompleting(session.id);
      try {
        object = await store.completeMultipart(
          session.storage_key,
          session.store_upload_id,
          parts.map((part) => ({ partNumber: part.part_number, etag: part.etag })),
        );
      } catch (error) {
        // The store may have assembled the object although the call failed (its answer was lost):
        // then the upload is done. When that cannot be told, the session stays completing for the
        // reaper to settle; only an object surely missing reopens it for another complete.
        const assembled = await store.head(session.storage_key).then(
          (info) => info ?? null,
          () => undefined,
        );
        if (assembled) return sessions.settle(session, caller.project, assembled, guard, holder);
        if (assembled === null) await sessions.reopen(session);
        throw error;
      } finally {
        stopHolding();
      }
      failpoint('multipart.complete.assembled');
      return sessions.settle(session, caller.project, object, guard, holder);
    },

    /**
     * Where an upload's completion stands, for a complete sent again: `completing`, or `completed`
     * with its file while the content it made is still the file's (its object the file's), else
     * undefined. `key`: see load.
     */
    async completion(caller: Caller, uploadId: string, key?: string) {
      const { session, file } = await load(caller, uploadId, key);
      const status = statusOf(session);
      if (status === 'completing') return { status } as const;
      if (status !== 'completed' || file.storage_key !== session.storage_key) return undefined;
      return { status, file, contentId: session.content_id } as const;
    },

    /** Aborts an open upload (`key`: see load). */
    async abort(caller: Caller, uploadId: string, key?: string): Promise<void> {
      const { session } = await load(caller, uploadId, key);
      requireOpen(session);
      if (!(await sessions.discard(session, 'aborted')))
        throw invalidState('The multipart upload is no longer open');
    },

    /** Aborts sessions left open past COFFER_MULTIPART_EXPIRY_SECONDS and removes their parts. */
    reap,
  };
}

export type MultipartService = ReturnType<typeof createMultipartService>;
