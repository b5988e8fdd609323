import { invalidState, notFound, supersededContent, validationError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { newId } from '../../lib/ids.ts';
import { normalizeMimeType } from '../../lib/mime.ts';
import type * as files from '../files/repo.ts';
import { checkMetadataSize } from '../files/rules.ts';
import type { Project } from '../projects/schemas.ts';
import { recordVersion, type Snapshot } from '../versions/repo.ts';
import {
  admitBytes,
  type ContentOutcome,
  commitNewContent,
  lockFile,
  type NewContent,
  recordNewContent,
  replaceContent,
} from './content-commit.ts';
import { findContent } from './content-repo.ts';
import type { ByteSource, IngestDeps, Intake, PlannedObject } from './intake.ts';
import { checkProjectRules, checkSingleUploadSize, checkTokenRules, newObjectKey } from './rules.ts';

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

  /**
   * Records new content of `file` (uploading), in the caller's transaction; its metadata, when given,
   * replaces the file's once the content is current.
   */
  async function recordContent(q: Queryable, caller: Caller, file: files.FileRow, content: NewContent) {
    if (content.metadata) {
      checkMetadataSize(content.metadata);
      await schemas.check(q, caller.project, content.metadata);
    }
    await recordNewContent(q, caller.project.id, file.id, content);
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
     * Makes an earlier version the file's content again (status unchanged): recorded as a new version,
     * or, where the newest version is being removed for good (`recorded: false`), as the version it
     * is; a version whose digest was lost (its job gave up) is read again, so the file's checksum follows.
     */
    async restore(
      q: Queryable,
      project: Project,
      file: files.FileRow,
      version: Snapshot & { id: string },
      { recorded = true }: { recorded?: boolean } = {},
    ): Promise<files.FileRow> {
      if (recorded) await recordVersion(q, file, version, 'restore', { sourceVersionId: version.id });
      if (version.checksum_sha256 === null) {
        await enqueueJob(q, 'digest', project.id, file.id, null, version.storage_key);
      }
      return replaceContent(q, file, { ...version, etag: version.etag ?? null });
    },
  };
}
