import {
  type DomainError,
  fileTooLarge,
  invalidState,
  permissionDenied,
  tokenLimitReached,
  validationError,
} from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Queryable } from '../../infra/db.ts';
import type { ObjectInfo } from '../../infra/storage/object-store.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { newId } from '../../lib/ids.ts';
import { normalizeMimeType } from '../../lib/mime.ts';
import { recordEvents } from '../events/repo.ts';
import * as files from '../files/repo.ts';
import { categoryOf, checkMetadataSize, checkName, normalizeTags } from '../files/rules.ts';
import { visibleFile } from '../files/service.ts';
import { MAX_OBJECT_BYTES } from '../projects/schemas.ts';
import { consumeToken, findToken } from '../uploads/token-repo.ts';
import { enforceQuotas } from '../usage/service.ts';
import { commitFile, followCommit } from './commit.ts';
import { createContentIngest } from './content.ts';
import {
  type ByteSource,
  createIntake,
  type IngestDeps,
  type PlannedObject,
  type Sealed,
  type UploadRequest,
} from './intake.ts';
import {
  checkProjectRules,
  checkTokenRules,
  newObjectKey,
  pastProjectSize,
  pastTokenSize,
  withTokenTags,
} from './rules.ts';
import { createServerWrites } from './server-writes.ts';

/**
 * The upload core: every way in (REST single and multipart uploads, new versions, restore, and the
 * protocol adapters) declares, receives, seals and commits through it, so that every rule about
 * what may be stored, and every state change, lives here once. Bytes come from a presigned URL
 * (sealed at confirm), from parts (assembled by the multipart service), or from a stream the
 * server receives itself (`writeFile`, `writeAtKey`).
 */
export function createIngestService(deps: IngestDeps) {
  const { config, db, store, folders, schemas, metrics } = deps;
  const intake = createIntake(deps);
  const { tokenOf, fromSource } = intake;

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
      checkTokenRules(token, contentType, request.size_bytes, request.size_field, request.type_field);
      if (request.exact_folder && folderId !== token.folder_id) {
        throw permissionDenied('The upload token stores files in another folder');
      }
      folderId = token.folder_id;
      metadata = { ...metadata, ...token.metadata };
      tags = withTokenTags(tags, token);
    }

    checkProjectRules(
      project,
      request.filename,
      contentType,
      request.size_bytes,
      request.size_field,
      request.type_field,
    );
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
      http_headers: request.http_headers ?? null,
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
      const field = request.type_field ?? 'content_type';
      throw validationError(`${field} must be a MIME type like image/png`, { field });
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
          client_checksum: sealed.checksum ?? null,
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

  return {
    /** The tags a write of `caller` gives a file: `tags`, an upload token's own merged in (its constraint (e)). */
    async writtenTags(caller: Caller, tags: string[]): Promise<string[]> {
      return withTokenTags(tags, await tokenOf(db, caller));
    },

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
     * The 413 of an upload declared without its size, held to `limit` (sizeLimit's answer for the
     * credential that declared `file`), that goes past it: the limit named as the checks of a declared
     * size name it for the first size past it, the upload token's before the project's. The project's
     * when neither is `limit` now (S3's object limit, or a setting changed since).
     */
    async pastSizeLimit(
      caller: Caller,
      file: Pick<files.FileRow, 'upload_token_id'>,
      limit: number,
      field: string,
    ): Promise<DomainError> {
      const token = file.upload_token_id === null ? undefined : await findToken(db, file.upload_token_id);
      const past =
        (token && pastTokenSize(token, limit + 1, field)) ??
        pastProjectSize(caller.project, limit + 1, field);
      return past?.details?.max_size_bytes === limit ? past : fileTooLarge(limit, 'project', field);
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

    ...createServerWrites(deps, intake, { plan, admit, recordFile }),
    ...createContentIngest(deps, intake),
  };
}

export type IngestService = ReturnType<typeof createIngestService>;
