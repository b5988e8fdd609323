import type { Readable } from 'node:stream';
import type { Config } from '../../config.ts';
import {
  invalidState,
  notFound,
  permissionDenied,
  tokenExpired,
  tokenLimitReached,
  unauthenticated,
  validationError,
} from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { ObjectInfo, ObjectStore } from '../../infra/storage/object-store.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { newId } from '../../lib/ids.ts';
import { normalizeMimeType } from '../../lib/mime.ts';
import { recordEvent, recordEvents } from '../events/repo.ts';
import * as files from '../files/repo.ts';
import { categoryOf, checkMetadataSize, checkName, normalizeTags } from '../files/rules.ts';
import { visibleFile } from '../files/service.ts';
import type { FolderService } from '../folders/service.ts';
import type { MetadataSchemaService } from '../metadata-schema/service.ts';
import { MAX_OBJECT_BYTES, type Project } from '../projects/schemas.ts';
import { queueThumbnails } from '../renditions/thumbnails.ts';
import { consumeToken, findToken, type UploadTokenRow } from '../uploads/token-repo.ts';
import { enforceQuotas } from '../usage/service.ts';
import { hasVersions, recordVersion, type Snapshot } from '../versions/repo.ts';
import {
  findContent,
  insertContent,
  type PendingContent,
  settleContentSize,
  transitionContent,
} from './content-repo.ts';
import {
  checkProjectRules,
  checkSingleUploadSize,
  checkTokenRules,
  newObjectKey,
  type SizeField,
} from './rules.ts';
import { restrictsTypes, screenHead } from './sniff.ts';

/** What a client declares about a file it is about to upload, by whatever protocol. */
export interface UploadRequest {
  filename: string;
  content_type: string;
  size_bytes: number;
  /** The request field the size came in, for errors. */
  size_field?: SizeField;
  folder_id?: string | null;
  /**
   * Whether `folder_id` is where the file must go (an S3 key names its folder): an upload token bound
   * to another folder is then refused, where otherwise its folder simply applies.
   */
  exact_folder?: boolean;
  metadata?: Record<string, unknown>;
  tags?: string[];
}

/** The object a new upload will have: decided, and made in the store, before its file is recorded. */
export interface PlannedObject {
  projectId: string;
  fileId: string;
  /** Set when the object is new content of the file rather than its first. */
  contentId?: string;
  storageKey: string;
  contentType: string;
  size: number;
  expiresAt: Date;
}

/**
 * How the bytes of a declared upload will arrive (a presigned URL, a multipart upload): made in the
 * store before the file is recorded, so that no database connection waits on the store, and undone
 * when the file's transaction does not commit.
 */
export interface ByteSource<T, U = undefined> {
  make(planned: PlannedObject): Promise<T>;
  undo(made: T, planned: PlannedObject): Promise<void>;
  /** More work for the transaction that records the file or content (e.g. recording the multipart session). */
  record?: (q: Queryable, planned: PlannedObject, made: T) => Promise<U>;
}

/** What the store answered for sealed bytes: their SHA-256 when it hashed them, and its ETag. */
export type Sealed = Pick<ObjectInfo, 'sha256' | 'etag'>;

/** What a client declares about new content of a file; `metadata`, when given, replaces the file's as it becomes current. */
export interface ContentRequest {
  content_type?: string;
  size_bytes: number;
  metadata?: Record<string, unknown>;
}

/** New content, committed at once (no scan) or waiting for its scan. */
export interface ContentOutcome {
  version_id: string;
  status: 'processing' | 'committed';
  file: files.FileRow;
}

/**
 * The bytes of an `uploading` file are complete: it becomes `processing` (a scan job queued) when
 * the project scans, else `ready` (event file.ready); with versioning on, the content is recorded
 * as a version. A checksum the store did not compute is left to the scan, or to a digest job.
 * Only from `uploading`: a second call is 409. `deferredSize` is the size of an upload declared
 * without one (an S3 multipart upload is declared with 0 bytes, held to `sizeLimit` part by part):
 * recorded now, and counted against the quota now.
 */
export async function commitFile(
  q: Queryable,
  project: Project,
  fileId: string,
  sealed: Sealed,
  deferredSize?: number,
): Promise<files.FileRow> {
  const scan = project.settings.virus_scan_enabled;
  const checksum = sealed.sha256 ?? null;
  const file = await files.transitionFile(q, project.id, fileId, 'uploading', scan ? 'processing' : 'ready', {
    checksum_sha256: checksum ?? undefined,
    etag: sealed.etag,
    upload_expires_at: null,
    size_bytes: deferredSize,
  });
  if (!file) throw invalidState('The file is no longer uploading');
  // A size learned only now counts against the quota now, in the transaction that records it.
  if (deferredSize !== undefined) await enforceQuotas(q, project, { bytes: deferredSize, files: 0 });
  if (!scan) await recordEvent(q, project, 'file.ready', file);
  await followCommit(q, project, file);
  return file;
}

/**
 * What follows a file's bytes being committed, in the same transaction: its version where the
 * project keeps versions, then its scan, or (ready) its thumbnails and, when the store did not hash
 * the bytes, its digest.
 */
async function followCommit(q: Queryable, project: Project, file: files.FileRow): Promise<void> {
  if (project.settings.versioning_enabled) await recordVersion(q, file, file, 'upload');
  if (project.settings.virus_scan_enabled) await enqueueJob(q, 'scan', project.id, file.id);
  else {
    await queueThumbnails(q, project, file);
    if (file.checksum_sha256 === null) {
      await enqueueJob(q, 'digest', project.id, file.id, null, file.storage_key);
    }
  }
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
    category: categoryOf(snapshot.content_type),
    checksum_sha256: snapshot.checksum_sha256,
    etag: snapshot.etag,
  });
  return updated!;
}

/**
 * Makes committed new content the file's current content, with its file.ready event: a version (its
 * id is the content's) where the project keeps versions or the file has some already (a file whose
 * earlier content predates versioning gets that content recorded first, so it can be restored);
 * otherwise the earlier content is retired, and collected after the grace period.
 */
export async function commitContent(
  q: Queryable,
  project: Project,
  content: PendingContent,
): Promise<files.FileRow> {
  const file = await files.findFile(q, content.project_id, content.file_id, true);
  if (!file || file.deleted_at !== null) throw notFound('File');
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

/** Commits new content whose bytes are sealed: at once, or once its scan finds it clean. */
async function commitNewContent(
  q: Queryable,
  project: Project,
  file: files.FileRow,
  contentId: string,
  sealed: Sealed,
): Promise<ContentOutcome> {
  const scan = project.settings.virus_scan_enabled;
  const checksum = sealed.sha256 ?? null;
  // Leaves `uploading` in this statement, so that a concurrent second confirm finds nothing to claim.
  const claimed = await transitionContent(q, contentId, 'uploading', scan ? 'processing' : 'committed', {
    checksum_sha256: checksum,
    etag: sealed.etag,
  });
  if (!claimed) throw invalidState('The upload is no longer uploading');
  if (scan) {
    await enqueueJob(q, 'scan', project.id, file.id, contentId);
    return { version_id: contentId, status: 'processing', file };
  }
  const updated = await commitContent(q, project, claimed);
  if (checksum === null) await enqueueJob(q, 'digest', project.id, file.id, contentId, claimed.storage_key);
  return { version_id: contentId, status: 'committed', file: updated };
}

/**
 * New content uploaded in parts is complete (commitFile's counterpart for a multipart upload over a
 * file): its size, learned now, counts against the quota now, and it commits as a PUT's would.
 */
export async function commitContentParts(
  q: Queryable,
  project: Project,
  fileId: string,
  contentId: string,
  sealed: Sealed & { size: number },
): Promise<ContentOutcome> {
  const file = await files.findFile(q, project.id, fileId, true);
  if (!file || file.deleted_at !== null) throw invalidState('The file is no longer there');
  await settleContentSize(q, contentId, sealed.size);
  await enforceQuotas(q, project, { bytes: sealed.size, files: 0 });
  return commitNewContent(q, project, file, contentId, sealed);
}

/** New content given up before it was complete (its multipart upload aborted or expired). */
export async function failContent(q: Queryable, contentId: string, reason: string): Promise<void> {
  await transitionContent(q, contentId, 'uploading', 'failed', { failure_reason: reason });
}

/**
 * The upload core: every way in (REST single and multipart uploads, new versions, restore, and the
 * protocol adapters) declares, receives, seals and commits through it, so that every rule about
 * what may be stored, and every state change, lives here once. Bytes come from a presigned URL
 * (sealed at confirm), from parts (assembled by the multipart service), or from a stream the
 * server receives itself (`writeFile`, `writeContent`).
 */
export function createIngestService(deps: {
  config: Config;
  db: Db;
  store: ObjectStore;
  folders: FolderService;
  schemas: MetadataSchemaService;
  metrics?: Metrics;
}) {
  const { config, db, store, folders, schemas, metrics } = deps;

  async function tokenOf(q: Queryable, caller: Caller): Promise<UploadTokenRow | undefined> {
    if (caller.principal.kind !== 'upload_token') return undefined;
    const token = await findToken(q, caller.principal.tokenId);
    if (!token) throw unauthenticated();
    if (token.expires_at.getTime() <= Date.now()) throw tokenExpired();
    return token;
  }

  /**
   * Every rule an upload must pass, in the documented order: the request's own shape, then the
   * upload token's constraints (a)–(e), then the project's configuration (f). Returns the file
   * as it will be created.
   */
  async function admit(q: Queryable, caller: Caller, request: UploadRequest, planned: PlannedObject) {
    const { project } = caller;
    const { contentType } = planned;
    let metadata = request.metadata ?? {};
    let tags = normalizeTags(request.tags ?? []);
    let folderId = request.folder_id ?? null;

    const token = await tokenOf(q, caller);
    if (token) {
      checkTokenRules(token, contentType, request.size_bytes, request.size_field);
      if (request.exact_folder && folderId !== token.folder_id) {
        throw permissionDenied('The upload token stores files in another folder');
      }
      folderId = token.folder_id;
      metadata = { ...metadata, ...token.metadata };
      tags = normalizeTags([...tags, ...(token.tags ?? [])]);
    }

    checkProjectRules(project, request.filename, contentType, request.size_bytes, request.size_field);
    if (folderId !== null && !(await folders.exists(q, project.id, folderId))) {
      throw validationError('folder_id is not a folder of this project', { field: 'folder_id' });
    }
    checkMetadataSize(metadata);
    await schemas.check(q, project, metadata);

    const file: files.NewFile = {
      id: planned.fileId,
      project_id: project.id,
      folder_id: folderId,
      status: 'uploading',
      filename: request.filename,
      content_type: contentType,
      size_bytes: request.size_bytes,
      category: categoryOf(contentType),
      storage_key: planned.storageKey,
      metadata,
      tags,
      owner_user_id: token?.owner_user_id ?? null,
      owner_org_id: token?.owner_org_id ?? null,
      upload_token_id: token?.id ?? null,
      upload_expires_at: planned.expiresAt,
    };
    return { file, token };
  }

  /** The checks that need no database, then the file's id, key and URL lifetime, before anything is stored. */
  function plan(caller: Caller, request: UploadRequest, expiresAt: Date | undefined): PlannedObject {
    checkName('filename', request.filename);
    const contentType = normalizeMimeType(request.content_type);
    if (!contentType) {
      throw validationError('content_type must be a MIME type like image/png', { field: 'content_type' });
    }
    const fileId = newId('file');
    return {
      projectId: caller.project.id,
      fileId,
      storageKey: newObjectKey(caller.project.id, fileId),
      contentType,
      size: request.size_bytes,
      expiresAt: expiresAt ?? new Date(Date.now() + config.uploadUrlTtlSeconds * 1000),
    };
  }

  /**
   * Records the file, counting it against its token and reserving its bytes against the project's
   * quotas, in the caller's transaction: uploading (event file.uploaded), or, when its bytes are
   * already stored and `sealed` (a server-side write), committed at once as commitFile would, in one
   * insert (ready, or processing when the project scans), its file.uploaded and file.ready events
   * recorded together.
   */
  async function recordFile(
    q: Queryable,
    caller: Caller,
    request: UploadRequest,
    planned: PlannedObject,
    sealed?: Sealed,
  ): Promise<files.FileRow> {
    const { project } = caller;
    const { file, token } = await admit(q, caller, request, planned);
    if (token && !(await consumeToken(q, token.id))) throw tokenLimitReached(token.max_files);
    const scan = project.settings.virus_scan_enabled;
    const row: files.NewFile = sealed
      ? {
          ...file,
          status: scan ? 'processing' : 'ready',
          checksum_sha256: sealed.sha256 ?? null,
          etag: sealed.etag,
          upload_expires_at: null,
        }
      : file;
    // The events first: from the file's insert to the commit its project's usage row stays locked,
    // and every upload of the project waits for it.
    await recordEvents(q, project, [
      { type: 'file.uploaded', file },
      ...(row.status === 'ready' ? [{ type: 'file.ready' as const, file: row }] : []),
    ]);
    const created = await files.insertFile(q, row);
    await enforceQuotas(q, project, { bytes: created.size_bytes, files: 1 });
    if (sealed) await followCommit(q, project, created);
    return created;
  }

  /** Checks that `object` holds the bytes declared for `expected`, or says what differs. */
  function checkObject(object: ObjectInfo | undefined, expected: number, status: string): ObjectInfo {
    if (!object) throw invalidState('No bytes were uploaded for this file yet', { status });
    if (object.size !== expected) {
      throw invalidState(`The uploaded object has ${object.size} bytes, not the declared ${expected}`, {
        declared_size_bytes: expected,
        uploaded_size_bytes: object.size,
      });
    }
    return object;
  }

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
    });
    await enforceQuotas(q, caller.project, { bytes: content.size, files: 0 });
  }

  /**
   * Makes the byte source of `planned` in the store, then records the upload in one transaction
   * (`record`); a source whose upload is not recorded is undone, so nothing is left in the store.
   */
  async function fromSource<T, U, R>(
    source: ByteSource<T, U>,
    planned: PlannedObject,
    record: (q: Queryable, made: T) => Promise<R>,
  ): Promise<R> {
    const made = await source.make(planned);
    try {
      const result = await db.tx((q) => record(q, made));
      metrics?.uploads.inc({ outcome: 'initiated' });
      return result;
    } catch (error) {
      await source.undo(made, planned).catch(() => undefined);
      throw error;
    }
  }

  /** Runs `commit` with the object written under `key`; the object goes when the commit does not happen. */
  async function keepingOnCommit<T>(key: string, commit: () => Promise<T>): Promise<T> {
    try {
      return await commit();
    } catch (error) {
      await store.delete(key).catch(() => undefined);
      throw error;
    }
  }

  return {
    /**
     * The most bytes an upload of `caller` may hold: the upload token's and the project's size
     * limits, else S3's object limit. An upload whose size is deferred is held to it as its parts arrive.
     */
    async sizeLimit(caller: Caller): Promise<number> {
      const token = await tokenOf(db, caller);
      const project = caller.project.settings.max_file_size_bytes;
      return Math.min(token?.max_size ?? MAX_OBJECT_BYTES, project ?? MAX_OBJECT_BYTES);
    },

    /**
     * Declares a new file: checks the caller's limits, makes the way its bytes will arrive
     * (`source`), and records the file (uploading) with its event, token count and quota
     * reservation in one transaction. A source that cannot be made leaves no file; a refused
     * upload leaves nothing in the store.
     */
    async declare<T, U = undefined>(
      caller: Caller,
      request: UploadRequest,
      source: ByteSource<T, U>,
      options: { uploadExpiresAt?: Date } = {},
    ): Promise<{ file: files.FileRow; made: T; extra: U | undefined }> {
      const planned = plan(caller, request, options.uploadExpiresAt);
      return fromSource(source, planned, async (q, made) => ({
        file: await recordFile(q, caller, request, planned),
        made,
        extra: await source.record?.(q, planned, made),
      }));
    },

    /**
     * Seals the bytes PUT to the presigned URL of an `uploading` file, checks them against the
     * declaration, and commits the file.
     */
    async confirm(caller: Caller, fileId: string): Promise<files.FileRow> {
      const uploadingFile = async () => {
        const found = await files.findFileAndSession(db, caller.project.id, fileId);
        const file = visibleFile(caller, found?.file);
        if (file.status !== 'uploading') {
          throw invalidState(`The file is ${file.status}, not uploading`, { status: file.status });
        }
        if (found!.sessionId) {
          throw invalidState('This file is uploaded in parts: complete its multipart upload', {
            upload_id: found!.sessionId,
          });
        }
        return file;
      };
      const file = await uploadingFile();
      // Sealed outside any transaction, so that no database connection waits on the store; sealing
      // is idempotent, so concurrent confirms agree. From here on no URL can change the bytes.
      const object = checkObject(await store.seal(file.storage_key), file.size_bytes, file.status);
      failpoint('upload.confirm.sealed');
      // The transition moves the file on only while it is uploading and not deleted (a multipart session
      // is made with its file, never later): a concurrent delete or confirm that came first makes it
      // fail, and the file as it is now tells why.
      const confirmed = await db
        .tx((q) => commitFile(q, caller.project, file.id, object))
        .catch(async (error: unknown) => {
          await uploadingFile();
          throw error;
        });
      failpoint('upload.confirm.committed');
      metrics?.uploads.inc({ outcome: 'completed' });
      return confirmed;
    },

    /**
     * The server-side way in: `body` (exactly `request.size_bytes` bytes) becomes a new file in one
     * request. The rules are checked before a byte is stored; the file is recorded and committed in
     * one transaction once the object is sealed, and the object is removed when that transaction fails.
     * `record` adds an adapter's own record of the upload to that transaction.
     */
    async writeFile(
      caller: Caller,
      request: UploadRequest,
      body: Readable,
      record?: (q: Queryable, file: files.FileRow) => Promise<void>,
    ): Promise<files.FileRow> {
      checkSingleUploadSize(request.size_bytes);
      const planned = plan(caller, request, undefined);
      const { token } = await admit(db, caller, request, planned);
      const bytes = restrictsTypes(caller.project, token)
        ? await screenHead(body, planned.contentType, request.filename)
        : body;
      const object = await store.write(planned.storageKey, bytes, {
        size: request.size_bytes,
        contentType: planned.contentType,
      });
      const file = await keepingOnCommit(planned.storageKey, () =>
        db.tx(async (q) => {
          const committed = await recordFile(q, caller, request, planned, object);
          await record?.(q, committed);
          return committed;
        }),
      );
      metrics?.uploads.inc({ outcome: 'initiated' });
      metrics?.uploads.inc({ outcome: 'completed' });
      return file;
    },

    /** A presigned URL for new content of a ready file; the current content stays served until it is confirmed. */
    async declareContent(
      caller: Caller,
      file: files.FileRow,
      request: { content_type?: string; size_bytes: number },
    ) {
      const content = await planContent(caller, file, request);
      // The URL first: one that cannot be made leaves no content behind.
      const url = await store.presignUpload(content.storageKey, content);
      await keepingOnCommit(content.storageKey, () => db.tx((q) => recordContent(q, caller, file, content)));
      return { version_id: content.id, upload_url: url, expires_at: content.expiresAt };
    },

    /** Seals the bytes of new content; they become current at once, or after the scan when the project scans. */
    async confirmContent(caller: Caller, file: files.FileRow, contentId: string): Promise<ContentOutcome> {
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
      return db.tx((q) => commitNewContent(q, caller.project, file, content.id, object));
    },

    /**
     * The head of a stream the server receives itself, checked against the declared type where the
     * caller's token or project limits types (see `screenHead`); the stream as it was otherwise.
     */
    async screen(caller: Caller, contentType: string, filename: string, body: Readable): Promise<Readable> {
      return restrictsTypes(caller.project, await tokenOf(db, caller))
        ? screenHead(body, contentType, filename)
        : body;
    },

    /** The server-side way in for new content of a ready file: `body` becomes it in one request. */
    async writeContent(
      caller: Caller,
      file: files.FileRow,
      request: ContentRequest,
      body: Readable,
    ): Promise<ContentOutcome> {
      const content = await planContent(caller, file, request);
      const bytes = restrictsTypes(caller.project, content.token)
        ? await screenHead(body, content.contentType, file.filename)
        : body;
      const object = await store.write(content.storageKey, bytes, content);
      return keepingOnCommit(content.storageKey, () =>
        db.tx(async (q) => {
          await recordContent(q, caller, file, content);
          return commitNewContent(q, caller.project, file, content.id, object);
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
      request: { content_type?: string; metadata?: Record<string, unknown> },
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

export type IngestService = ReturnType<typeof createIngestService>;
