import type { Config } from '../../config.ts';
import { invalidState, notFound, validationError, versioningDisabled } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { newId } from '../../lib/ids.ts';
import { normalizeMimeType } from '../../lib/mime.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { changedFields, recordAudit } from '../audit/service.ts';
import { recordEvent } from '../events/outbox.ts';
import * as files from '../files/repo.ts';
import { categoryOf } from '../files/rules.ts';
import type { FileObject } from '../files/schemas.ts';
import {
  type PresignedUrl,
  presignDownload,
  requireReady,
  urlLifetimeSeconds,
  visibleFile,
} from '../files/service.ts';
import type { Project } from '../projects/schemas.ts';
import { checkProjectRules, checkSingleUploadSize, newObjectKey } from '../uploads/service.ts';
import { enforceQuotas } from '../usage/service.ts';
import { type FileVersion, findVersion, hasVersions, listVersions, recordVersion } from './repo.ts';

export type ContentStatus = 'uploading' | 'processing' | 'committed' | 'failed' | 'quarantined';

export interface PendingContent {
  id: string;
  project_id: string;
  file_id: string;
  storage_key: string;
  size_bytes: number;
  content_type: string;
  checksum_sha256: string | null;
  status: ContentStatus;
  failure_reason: string | null;
}

const CONTENT_COLUMNS =
  'id, project_id, file_id, storage_key, size_bytes, content_type, checksum_sha256, status, failure_reason';

export async function findContent(
  q: Queryable,
  fileId: string,
  id: string,
): Promise<PendingContent | undefined> {
  const [row] = await q.query<PendingContent>(
    `SELECT ${CONTENT_COLUMNS} FROM pending_contents WHERE file_id = $1 AND id = $2`,
    [fileId, id],
  );
  return row;
}

/**
 * Makes checked new content the file's current content and a version (its id is the content's).
 * A file whose earlier content predates versioning gets that content recorded first, so it
 * can be restored.
 */
export async function commitContent(
  q: Queryable,
  project: Project,
  content: PendingContent,
): Promise<files.FileRow> {
  const file = await files.findFile(q, content.project_id, content.file_id, true);
  if (!file || file.deleted_at !== null) throw notFound('File');
  if (!(await hasVersions(q, file.id))) await recordVersion(q, file, file, 'upload');
  await recordVersion(q, file, content, 'upload', { id: content.id });
  await q.query("UPDATE pending_contents SET status = 'committed', updated_at = now() WHERE id = $1", [
    content.id,
  ]);
  const updated = await files.updateFile(q, file.project_id, file.id, {
    storage_key: content.storage_key,
    size_bytes: content.size_bytes,
    content_type: content.content_type,
    category: categoryOf(content.content_type),
    checksum_sha256: content.checksum_sha256,
  });
  await recordEvent(q, project, 'file.ready', updated!);
  return updated!;
}

export function createVersionService(deps: { config: Config; db: Db; store: ObjectStore }) {
  const { config, db, store } = deps;

  function requireVersioning(caller: Caller): void {
    if (!caller.project.settings.versioning_enabled) throw versioningDisabled();
  }

  async function fileOf(
    caller: Caller,
    fileId: string,
    q: Queryable = db,
    lock = false,
  ): Promise<files.FileRow> {
    requireVersioning(caller);
    return visibleFile(caller, await files.findFile(q, caller.project.id, fileId, lock));
  }

  async function versionOf(q: Queryable, fileId: string, versionId: string): Promise<FileVersion> {
    const version = await findVersion(q, fileId, versionId);
    if (!version) throw notFound('Version');
    return version;
  }

  return {
    async list(caller: Caller, fileId: string) {
      const file = await fileOf(caller, fileId);
      const items = await listVersions(db, file.id);
      return { items, total: items.length };
    },

    async download(
      caller: Caller,
      fileId: string,
      versionId: string,
      ttl: number | undefined,
    ): Promise<PresignedUrl> {
      const seconds = urlLifetimeSeconds(caller.project, ttl, caller.project.settings.signed_url_ttl_seconds);
      const file = await fileOf(caller, fileId);
      // As for the file download: no bytes of a file that is still being checked or has failed.
      requireReady(file);
      const version = await versionOf(db, file.id, versionId);
      return presignDownload(store, { ...version, filename: file.filename }, seconds);
    },

    /** Copies the version's content onto the file and records the restore as a new version; status unchanged. */
    async restore(
      caller: Caller,
      fileId: string,
      versionId: string,
      audit: AuditContext,
    ): Promise<FileObject> {
      return db.tx(async (q) => {
        const file = await fileOf(caller, fileId, q, true);
        const version = await versionOf(q, file.id, versionId);
        await recordVersion(q, file, version, 'restore', { sourceVersionId: version.id });
        // A version whose digest was lost (its job gave up) is read again, so the file's checksum follows.
        if (version.checksum_sha256 === null) {
          await enqueueJob(q, 'digest', caller.project.id, file.id, null, version.storage_key);
        }
        const updated = await files.updateFile(q, caller.project.id, file.id, {
          storage_key: version.storage_key,
          size_bytes: version.size_bytes,
          content_type: version.content_type,
          category: categoryOf(version.content_type),
          checksum_sha256: version.checksum_sha256,
        });
        const content = (row: typeof file) => ({
          size_bytes: row.size_bytes,
          content_type: row.content_type,
          checksum_sha256: row.checksum_sha256,
        });
        await recordAudit(q, audit, {
          action: 'file.restore',
          projectId: caller.project.id,
          targets: { file_id: file.id, version_id: version.id },
          ...changedFields(content(file), content(updated!)),
        });
        return files.toFileObject(updated!);
      });
    },

    /** A presigned URL for new bytes of a ready file; the current content stays served until they are confirmed. */
    async createContent(
      caller: Caller,
      fileId: string,
      request: { content_type?: string; size_bytes: number },
    ) {
      const file = await fileOf(caller, fileId);
      if (file.status !== 'ready') {
        throw invalidState(`New content can be uploaded only for ready files; this file is ${file.status}`, {
          status: file.status,
        });
      }
      const contentType = normalizeMimeType(request.content_type ?? file.content_type);
      if (!contentType)
        throw validationError('content_type must be a MIME type like image/png', { field: 'content_type' });
      checkSingleUploadSize(request.size_bytes);
      checkProjectRules(caller.project, file.filename, contentType, request.size_bytes);
      const id = newId('ver');
      const storageKey = newObjectKey(caller.project.id, file.id);
      const expiresAt = new Date(Date.now() + config.uploadUrlTtlSeconds * 1000);
      // The URL first: one that cannot be made leaves no content behind.
      const url = await store.presignUpload(storageKey, { size: request.size_bytes, contentType, expiresAt });
      try {
        await db.tx(async (q) => {
          await q.query(
            `INSERT INTO pending_contents (id, project_id, file_id, storage_key, size_bytes, content_type, upload_expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)`,
            [id, caller.project.id, file.id, storageKey, request.size_bytes, contentType, expiresAt],
          );
          await enforceQuotas(q, caller.project, { bytes: request.size_bytes, files: 0 });
        });
      } catch (error) {
        await store.delete(storageKey).catch(() => undefined);
        throw error;
      }
      return { version_id: id, file_id: file.id, upload_url: url, expires_at: expiresAt.toISOString() };
    },

    /** Checks the uploaded bytes; they become current at once, or after the scan when the project scans. */
    async confirmContent(caller: Caller, fileId: string, contentId: string) {
      const file = await fileOf(caller, fileId);
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
      const scan = caller.project.settings.virus_scan_enabled;
      return db.tx(async (q) => {
        // Leaves `uploading` in this statement, so that a concurrent second confirm finds nothing to claim.
        const claimed = await q.query<PendingContent>(
          `UPDATE pending_contents SET status = $3, checksum_sha256 = $4, upload_expires_at = NULL, updated_at = now()
           WHERE file_id = $1 AND id = $2 AND status = 'uploading' RETURNING ${CONTENT_COLUMNS}`,
          [file.id, content.id, scan ? 'processing' : 'committed', object.sha256 ?? null],
        );
        if (claimed.length === 0) throw invalidState('The upload is no longer uploading');
        if (scan) {
          await enqueueJob(q, 'scan', caller.project.id, file.id, content.id);
          return { version_id: content.id, status: 'processing' as const, file: files.toFileObject(file) };
        }
        const updated = await commitContent(q, caller.project, claimed[0]!);
        if (object.sha256 === undefined)
          await enqueueJob(q, 'digest', caller.project.id, file.id, content.id, content.storage_key);
        return { version_id: content.id, status: 'committed' as const, file: files.toFileObject(updated) };
      });
    },
  };
}

export type VersionService = ReturnType<typeof createVersionService>;
