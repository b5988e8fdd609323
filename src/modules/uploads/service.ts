import type { Config } from '../../config.ts';
import {
  fileTooLarge,
  invalidState,
  tokenExpired,
  tokenLimitReached,
  unauthenticated,
  validationError,
} from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import type { Metrics } from '../../infra/metrics.ts';
import { MAX_PART_SIZE, type ObjectStore } from '../../infra/storage/object-store.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { newId, randomUlid } from '../../lib/ids.ts';
import { mimeAllowed, normalizeMimeType, parseMimeList } from '../../lib/mime.ts';
import { recordEvent } from '../events/outbox.ts';
import * as files from '../files/repo.ts';
import { categoryOf, checkMetadataSize, checkName, extensionMatches, normalizeTags } from '../files/rules.ts';
import { visibleFile } from '../files/service.ts';
import type { FolderService } from '../folders/service.ts';
import type { MetadataSchemaService } from '../metadata-schema/service.ts';
import type { Project } from '../projects/schemas.ts';
import { enforceQuotas } from '../usage/service.ts';
import { recordVersion } from '../versions/repo.ts';
import { consumeToken, findToken, type UploadTokenRow } from './token-repo.ts';

/** The object a new upload will have: decided, and made in the store, before its file is recorded. */
export interface PlannedObject {
  fileId: string;
  storageKey: string;
  contentType: string;
  size: number;
  expiresAt: Date;
}

/** What a client declares about a file it is about to upload (single or multipart). */
export interface UploadRequest {
  filename: string;
  content_type: string;
  size_bytes: number;
  /** The request field the size came in, for errors (multipart start calls it total_size_bytes). */
  size_field?: 'size_bytes' | 'total_size_bytes';
  folder_id?: string | null;
  metadata?: Record<string, unknown>;
  tags?: string[];
}

/** The storage key of a new object: generated ids only, so user input never reaches a path. */
export function newObjectKey(projectId: string, fileId: string): string {
  return `${projectId}/${fileId}/${randomUlid()}`;
}

/** One PUT carries at most 5 GiB on every store (S3's limit); larger files go in parts. */
export function checkSingleUploadSize(size: number): void {
  if (size > MAX_PART_SIZE) {
    throw validationError(`A single upload holds at most ${MAX_PART_SIZE} bytes: use a multipart upload`, {
      field: 'size_bytes',
      max_size_bytes: MAX_PART_SIZE,
    });
  }
}

/** The project's configuration checks of an upload (f): size ceiling (413), MIME allowlist and extension (422). */
export function checkProjectRules(
  project: Project,
  filename: string,
  contentType: string,
  size: number,
  sizeField = 'size_bytes',
): void {
  const { max_file_size_bytes, allowed_mime_types } = project.settings;
  if (max_file_size_bytes !== null && size > max_file_size_bytes) {
    throw fileTooLarge(max_file_size_bytes, 'project', sizeField);
  }
  if (allowed_mime_types !== null) {
    const list = parseMimeList(allowed_mime_types);
    if ('entries' in list && !mimeAllowed(list.entries, contentType)) {
      throw validationError(`content_type ${contentType} is not allowed in this project`, {
        field: 'content_type',
        allowed_mime_types: list.entries,
      });
    }
  }
  if (!extensionMatches(filename, contentType)) {
    throw validationError(`The extension of ${JSON.stringify(filename)} does not match ${contentType}`, {
      field: 'filename',
      content_type: contentType,
    });
  }
}

export function createUploadService(deps: {
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
      if (request.size_bytes > token.max_size)
        throw fileTooLarge(token.max_size, 'token', request.size_field);
      if (!mimeAllowed(token.allowed_mime_types, contentType)) {
        throw validationError(`content_type ${contentType} is not allowed by the upload token`, {
          field: 'content_type',
          allowed_mime_types: token.allowed_mime_types,
        });
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
      fileId,
      storageKey: newObjectKey(caller.project.id, fileId),
      contentType,
      size: request.size_bytes,
      expiresAt: expiresAt ?? new Date(Date.now() + config.uploadUrlTtlSeconds * 1000),
    };
  }

  return {
    /**
     * Creates the file record (status uploading, event file.uploaded) in one transaction that also
     * counts the upload against its token. The store's side (`object.make`: a URL, a multipart
     * upload) is done before it, so that no database connection waits on the store, and undone when
     * the transaction does not commit: a URL that cannot be made leaves no file, and a refused
     * upload leaves nothing in the store.
     */
    async createUpload<T, U = undefined>(
      caller: Caller,
      request: UploadRequest,
      options: {
        uploadExpiresAt?: Date;
        object: {
          make(planned: PlannedObject): Promise<T>;
          undo(made: T, planned: PlannedObject): Promise<void>;
        };
        /** More work for the same transaction (e.g. recording a multipart session). */
        also?: (q: Queryable, file: files.FileRow, made: T) => Promise<U>;
      },
    ): Promise<{ file: files.FileRow; made: T; extra: U | undefined }> {
      const planned = plan(caller, request, options.uploadExpiresAt);
      const made = await options.object.make(planned);
      try {
        const result = await db.tx(async (q) => {
          const { file, token } = await admit(q, caller, request, planned);
          if (token && !(await consumeToken(q, token.id))) throw tokenLimitReached(token.max_files);
          // The event first: from the file's insert to the commit its project's usage row stays locked,
          // and every upload of the project waits for it.
          await recordEvent(q, caller.project, 'file.uploaded', file);
          const created = await files.insertFile(q, file);
          await enforceQuotas(q, caller.project, { bytes: created.size_bytes, files: 1 });
          return { file: created, made, extra: await options.also?.(q, created, made) };
        });
        metrics?.uploads.inc({ outcome: 'initiated' });
        return result;
      } catch (error) {
        await options.object.undo(made, planned).catch(() => undefined);
        throw error;
      }
    },

    async initiate(caller: Caller, request: UploadRequest) {
      checkSingleUploadSize(request.size_bytes);
      const { file, made: url } = await this.createUpload(caller, request, {
        object: {
          make: (planned) =>
            store.presignUpload(planned.storageKey, {
              size: planned.size,
              contentType: planned.contentType,
              expiresAt: planned.expiresAt,
            }),
          undo: (_url, planned) => store.delete(planned.storageKey),
        },
      });
      return { file_id: file.id, upload_url: url, expires_at: file.upload_expires_at!.toISOString() };
    },

    /** Checks the uploaded object against the declaration, then moves the file out of `uploading`. */
    async confirm(caller: Caller, fileId: string) {
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
      const object = await store.seal(file.storage_key);
      if (!object) throw invalidState('No bytes were uploaded for this file yet', { status: file.status });
      if (object.size !== file.size_bytes) {
        throw invalidState(
          `The uploaded object has ${object.size} bytes, not the declared ${file.size_bytes}`,
          {
            declared_size_bytes: file.size_bytes,
            uploaded_size_bytes: object.size,
          },
        );
      }
      failpoint('upload.confirm.sealed');
      // The update moves the file on only while it is uploading and not deleted (a multipart session is
      // made with its file, never later): a concurrent delete or confirm that came first makes it fail,
      // and the file as it is now tells why.
      const confirmed = await db
        .tx((q) => finishUpload(q, caller.project, file.id, object.sha256 ?? null))
        .catch(async (error: unknown) => {
          await uploadingFile();
          throw error;
        });
      failpoint('upload.confirm.committed');
      metrics?.uploads.inc({ outcome: 'completed' });
      return files.toFileObject(confirmed);
    },
  };
}

/**
 * The bytes of an `uploading` file are complete: it becomes `processing` (a scan job queued) when
 * the project scans, else `ready` (event file.ready); with versioning on, the content is recorded
 * as a version. A checksum the store did not compute is left to the scan, or to a digest job.
 * Only from `uploading`: a second call is 409.
 */
export async function finishUpload(
  q: Queryable,
  project: Project,
  fileId: string,
  checksum: string | null,
): Promise<files.FileRow> {
  const scan = project.settings.virus_scan_enabled;
  const file = await files.updateFile(
    q,
    project.id,
    fileId,
    {
      status: scan ? 'processing' : 'ready',
      checksum_sha256: checksum ?? undefined,
      upload_expires_at: null,
    },
    'uploading',
  );
  if (!file) throw invalidState('The file is no longer uploading');
  if (project.settings.versioning_enabled) await recordVersion(q, file, file, 'upload');
  if (scan) await enqueueJob(q, 'scan', project.id, file.id);
  else {
    await recordEvent(q, project, 'file.ready', file);
    if (checksum === null) await enqueueJob(q, 'digest', project.id, file.id, null, file.storage_key);
  }
  return file;
}

export type UploadService = ReturnType<typeof createUploadService>;
