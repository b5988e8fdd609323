import { invalidState, notFound, supersededContent, validationError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { newId } from '../../lib/ids.ts';
import { normalizeMimeType } from '../../lib/mime.ts';
import { recordEvent } from '../events/repo.ts';
import * as files from '../files/repo.ts';
import { categoryOf, checkMetadataSize } from '../files/rules.ts';
import type { Project } from '../projects/schemas.ts';
import { queueThumbnails } from '../renditions/thumbnails.ts';
import { enforceQuotas } from '../usage/service.ts';
import { hasVersions, recordVersion, type Snapshot } from '../versions/repo.ts';
import {
  findContent,
  hasNewerCommitted,
  insertContent,
  type PendingContent,
  settleContentSize,
  transitionContent,
} from './content-repo.ts';
import type {
  ByteSource,
  IngestDeps,
  Intake,
  PlannedObject,
  Sealed,
  WriteGuard,
  WrittenBody,
} from './intake.ts';
import { checkProjectRules, checkSingleUploadSize, checkTokenRules, newObjectKey } from './rules.ts';
import { restrictsTypes, screenHead } from './sniff.ts';

/**
 * What a client declares about new content of a file; `metadata`, when given, replaces the file's as
 * it becomes current; `http_headers` are the content's own (none when not given).
 */
export interface ContentRequest {
  content_type?: string;
  size_bytes: number;
  metadata?: Record<string, unknown>;
  http_headers?: files.HttpHeaders;
}

/** Holds recorded new content of `bytes` to the project's quota (its file is counted already). */
const admitBytes = (q: Queryable, project: Project, bytes: number) =>
  enforceQuotas(q, project, { bytes, files: 0 });

/** Why new content that a newer write to its file overtook failed. */
const SUPERSEDED = 'superseded';

/**
 * New content, committed at once (no scan), waiting for its scan, or not kept: a newer write to the
 * file was committed first (S3's last writer wins; the REST confirm refuses it).
 */
export interface ContentOutcome {
  version_id: string;
  status: 'processing' | 'committed' | 'superseded';
  /** The file: with its content before while the new content waits for its scan, or was superseded. */
  file: files.FileRow;
  /** The ETag of the new content's bytes. */
  etag: string;
}

/** Makes `snapshot` the file's current content; its metadata, status and folder are untouched. */
async function replaceContent(
  q: Queryable,
  file: files.FileRow,
  snapshot: Snapshot & { etag: string | null },
  metadata?: Record<string, unknown>,
): Promise<files.FileRow> {
  const updated = await files.updateFile(q, file.project_id, file.id, {
    metadata,
    storage_key: snapshot.storage_key,
    size_bytes: snapshot.size_bytes,
    content_type: snapshot.content_type,
    // The content's own headers and checksum, none when it has none: they describe its bytes, not the file.
    http_headers: snapshot.http_headers ?? null,
    client_checksum: snapshot.client_checksum ?? null,
    category: categoryOf(snapshot.content_type),
    checksum_sha256: snapshot.checksum_sha256,
    etag: snapshot.etag,
  });
  return updated!;
}

/**
 * Makes committed new content the current content of `file` (locked, and no newer content of it
 * committed), with its file.ready event: a version (its id is the content's) where the project
 * keeps versions or the file has some already (a file whose earlier content predates versioning
 * gets that content recorded first, so it can be restored); otherwise the earlier content is
 * retired, and collected after the grace period.
 */
async function makeCurrent(
  q: Queryable,
  project: Project,
  file: files.FileRow,
  content: PendingContent,
): Promise<files.FileRow> {
  const versioned = await hasVersions(q, file.id);
  if (project.settings.versioning_enabled || versioned) {
    if (!versioned) await recordVersion(q, file, file, 'upload');
    await recordVersion(q, file, content, 'upload', { id: content.id });
  } else {
    // Replaced, not kept (an S3 PUT over a key where versioning is off): the old bytes are collected.
    await files.retireObject(q, file.project_id, file.storage_key);
  }
  const updated = await replaceContent(q, file, content, content.metadata ?? undefined);
  await recordEvent(q, project, 'file.ready', updated);
  await queueThumbnails(q, project, updated);
  return updated;
}

/**
 * The file new content commits over, locked (a delete, or another content's commit, waits); `gone`:
 * the refusal when it is deleted.
 */
async function lockFile(
  q: Queryable,
  projectId: string,
  fileId: string,
  gone = () => notFound('File'),
): Promise<files.FileRow> {
  const file = await files.findFile(q, projectId, fileId, true);
  if (!file || file.deleted_at !== null) throw gone();
  return file;
}

/**
 * Content whose scan passed (`processing`) becomes the current content of `file` (locked, not
 * deleted), unless a newer write to the file was committed first (contents of a file are scanned at
 * once, in any order): then it fails (`superseded`) and its bytes are collected, as at a confirm it
 * overtook. Answers the file, or undefined when the content had left `processing` already.
 */
export async function commitScannedContent(
  q: Queryable,
  project: Project,
  file: files.FileRow,
  content: PendingContent,
): Promise<files.FileRow | undefined> {
  const overtaken = await hasNewerCommitted(q, file.id, content.id);
  const settled = await transitionContent(
    q,
    content.id,
    'processing',
    overtaken ? 'failed' : 'committed',
    overtaken ? { failure_reason: SUPERSEDED } : {},
  );
  if (!settled) return undefined;
  return overtaken ? file : makeCurrent(q, project, file, settled);
}

/**
 * Commits new content of `file` (locked) whose bytes are sealed: at once, or once its scan finds it
 * clean. Content a newer write to the file overtook (committed first) would never become current:
 * it fails (`superseded`), its bytes collected as rejected content's are. `admit` runs first for
 * content that is kept.
 */
async function commitNewContent(
  q: Queryable,
  project: Project,
  file: files.FileRow,
  contentId: string,
  sealed: Sealed,
  admit?: () => Promise<void>,
): Promise<ContentOutcome> {
  const scan = project.settings.virus_scan_enabled;
  const checksum = sealed.sha256 ?? null;
  const overtaken = await hasNewerCommitted(q, file.id, contentId);
  if (!overtaken) await admit?.();
  // Leaves `uploading` in this statement, so that a concurrent second confirm finds nothing to claim.
  const claimed = await transitionContent(
    q,
    contentId,
    'uploading',
    overtaken ? 'failed' : scan ? 'processing' : 'committed',
    { checksum_sha256: checksum, etag: sealed.etag, failure_reason: overtaken ? SUPERSEDED : undefined },
  );
  if (!claimed) throw invalidState('The upload is no longer uploading');
  if (overtaken) return { version_id: contentId, status: 'superseded', file, etag: sealed.etag };
  if (scan) {
    await enqueueJob(q, 'scan', project.id, file.id, contentId);
    return { version_id: contentId, status: 'processing', file, etag: sealed.etag };
  }
  const updated = await makeCurrent(q, project, file, claimed);
  if (checksum === null) await enqueueJob(q, 'digest', project.id, file.id, contentId, claimed.storage_key);
  return { version_id: contentId, status: 'committed', file: updated, etag: sealed.etag };
}

/**
 * New content uploaded in parts is complete (commitFile's counterpart for a multipart upload over a
 * file): its size, learned now, counts against the quota now (unless a newer write overtook it), and
 * it commits as a PUT's would.
 */
export async function commitContentParts(
  q: Queryable,
  project: Project,
  fileId: string,
  contentId: string,
  sealed: Sealed & { size: number },
): Promise<ContentOutcome> {
  // Deleted while its parts were uploaded: the upload is what is refused (its session then ends aborted).
  const file = await lockFile(q, project.id, fileId, () => invalidState('The file is no longer there'));
  await settleContentSize(q, contentId, sealed.size);
  // Content a newer write overtook is not kept: no quota holds its complete back.
  return commitNewContent(q, project, file, contentId, sealed, () => admitBytes(q, project, sealed.size));
}

/** New content given up before it was complete (its multipart upload aborted or expired). */
export async function failContent(q: Queryable, contentId: string, reason: string): Promise<void> {
  await transitionContent(q, contentId, 'uploading', 'failed', { failure_reason: reason });
}

/**
 * New content of an existing file (a new version): declared with a presigned URL or in parts,
 * confirmed, or written in one request, and an earlier version restored; the file's current
 * content stays served until the new content commits.
 */
export function createContentIngest(deps: IngestDeps, intake: Intake) {
  const { config, db, store, schemas } = deps;
  const { tokenOf, fromSource, keepingOnCommit } = intake;

  /**
   * The checks new content of `file` must pass, an upload token's constraints included (new content
   * at an S3 key is an upload like any other); answers its normalised content type and the token.
   */
  async function admitContent(
    caller: Caller,
    file: files.FileRow,
    request: { content_type?: string; size_bytes: number },
  ) {
    if (file.status !== 'ready') {
      throw invalidState(`New content can be uploaded only for ready files; this file is ${file.status}`, {
        status: file.status,
      });
    }
    const contentType = normalizeMimeType(request.content_type ?? file.content_type);
    if (!contentType)
      throw validationError('content_type must be a MIME type like image/png', { field: 'content_type' });
    checkSingleUploadSize(request.size_bytes);
    const token = await tokenOf(db, caller);
    if (token) checkTokenRules(token, contentType, request.size_bytes);
    checkProjectRules(caller.project, file.filename, contentType, request.size_bytes);
    return { contentType, token };
  }

  /** New content of `file`, checked, with its id, key and URL lifetime, before anything is stored. */
  async function planContent(caller: Caller, file: files.FileRow, request: ContentRequest) {
    const { contentType, token } = await admitContent(caller, file, request);
    return {
      contentType,
      token,
      // As on a new file, the upload token's metadata wins over the request's.
      metadata: request.metadata && { ...request.metadata, ...token?.metadata },
      httpHeaders: request.http_headers,
      id: newId('ver'),
      storageKey: newObjectKey(caller.project.id, file.id),
      size: request.size_bytes,
      expiresAt: new Date(Date.now() + config.uploadUrlTtlSeconds * 1000),
    };
  }

  /** Records new content of `file` (uploading) and reserves its bytes, in the caller's transaction. */
  async function recordContent(
    q: Queryable,
    caller: Caller,
    file: files.FileRow,
    content: {
      id: string;
      storageKey: string;
      size: number;
      contentType: string;
      expiresAt: Date;
      metadata?: Record<string, unknown>;
      httpHeaders?: files.HttpHeaders;
      checksum?: files.ContentChecksum;
    },
  ): Promise<void> {
    if (content.metadata) {
      checkMetadataSize(content.metadata);
      await schemas.check(q, caller.project, content.metadata);
    }
    await insertContent(q, {
      id: content.id,
      project_id: caller.project.id,
      file_id: file.id,
      storage_key: content.storageKey,
      size_bytes: content.size,
      content_type: content.contentType,
      upload_expires_at: content.expiresAt,
      metadata: content.metadata,
      http_headers: content.httpHeaders,
      client_checksum: content.checksum,
    });
  }

  return {
    /** A presigned URL for new content of a ready file; the current content stays served until it is confirmed. */
    async declareContent(
      caller: Caller,
      file: files.FileRow,
      request: { content_type?: string; size_bytes: number },
    ) {
      const content = await planContent(caller, file, request);
      // The URL first: one that cannot be made leaves no content behind.
      const url = await store.presignUpload(content.storageKey, content);
      await keepingOnCommit(content.storageKey, () =>
        db.tx(async (q) => {
          await recordContent(q, caller, file, content);
          await admitBytes(q, caller.project, content.size);
        }),
      );
      return { version_id: content.id, upload_url: url, expires_at: content.expiresAt };
    },

    /** Seals the bytes of new content; they become current at once, or after the scan when the project scans. */
    async confirmContent(
      caller: Caller,
      file: files.FileRow,
      contentId: string,
    ): Promise<ContentOutcome & { status: 'processing' | 'committed' }> {
      const content = await findContent(db, file.id, contentId);
      if (!content) throw notFound('Upload');
      if (content.status !== 'uploading') {
        throw invalidState(`The upload is ${content.status}, not uploading`, { status: content.status });
      }
      const object = await store.seal(content.storage_key);
      if (object?.size !== content.size_bytes) {
        throw invalidState('The uploaded object is missing or not of the declared size', {
          declared_size_bytes: content.size_bytes,
          uploaded_size_bytes: object?.size ?? null,
        });
      }
      failpoint('version.confirm.sealed');
      const outcome = await db.tx(async (q) =>
        commitNewContent(q, caller.project, await lockFile(q, file.project_id, file.id), content.id, object),
      );
      // Not kept, which the answer must say (an S3 PUT overtaken so answers 200: the last writer wins).
      if (outcome.status === 'superseded') throw supersededContent(content.id);
      return { ...outcome, status: outcome.status };
    },

    /**
     * The server-side way in for new content of a ready file: `body` becomes it in one request, with
     * the checksum it verified if any; `guard` runs first in the transaction that records it.
     */
    async writeContent(
      caller: Caller,
      file: files.FileRow,
      request: ContentRequest,
      body: WrittenBody,
      guard?: WriteGuard,
    ): Promise<ContentOutcome> {
      const content = await planContent(caller, file, request);
      const bytes = restrictsTypes(caller.project, content.token)
        ? await screenHead(body, content.contentType, file.filename)
        : body;
      const object = await store.write(content.storageKey, bytes, content);
      return keepingOnCommit(content.storageKey, () =>
        db.tx(async (q) => {
          await guard?.(q);
          // The file first, as every commit of new content locks it: recording the content takes a
          // key share of the file row, and a second write holding one too would wait for this one's
          // lock while this one waits for its (a deadlock); the quota lock then comes after it too.
          const locked = await lockFile(q, file.project_id, file.id);
          // The body was read to its end: a checksum its client sent is verified.
          await recordContent(q, caller, file, { ...content, checksum: body.checksum });
          // A write a newer one overtook is not kept, so it is not held to the quota either.
          return commitNewContent(q, caller.project, locked, content.id, object, () =>
            admitBytes(q, caller.project, content.size),
          );
        }),
      );
    },

    /**
     * New content of a ready file whose bytes come from `source` (a multipart upload) and whose size
     * is deferred to completion (`commitContentParts`), held to the caller's limit part by part;
     * `metadata`, when given, replaces the file's once the content is current.
     */
    async declareContentParts<T, U>(
      caller: Caller,
      file: files.FileRow,
      request: Omit<ContentRequest, 'size_bytes'>,
      source: ByteSource<T, U>,
      expiresAt: Date,
    ): Promise<{ contentId: string; extra: U | undefined }> {
      const content = await planContent(caller, file, { ...request, size_bytes: 0 });
      const planned: PlannedObject = {
        projectId: caller.project.id,
        fileId: file.id,
        contentId: content.id,
        storageKey: content.storageKey,
        contentType: content.contentType,
        size: 0,
        expiresAt,
      };
      return fromSource(source, planned, async (q, made) => {
        await recordContent(q, caller, file, { ...content, expiresAt });
        return { contentId: content.id, extra: await source.record?.(q, planned, made) };
      });
    },

    /**
     * Makes an earlier version the file's content again, recorded as a new version (status unchanged);
     * a version whose digest was lost (its job gave up) is read again, so the file's checksum follows.
     */
    async restore(
      q: Queryable,
      project: Project,
      file: files.FileRow,
      version: Snapshot & { id: string },
    ): Promise<files.FileRow> {
      await recordVersion(q, file, version, 'restore', { sourceVersionId: version.id });
      if (version.checksum_sha256 === null) {
        await enqueueJob(q, 'digest', project.id, file.id, null, version.storage_key);
      }
      return replaceContent(q, file, { ...version, etag: version.etag ?? null });
    },
  };
}
