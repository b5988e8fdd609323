import { invalidState, legalHold, notFound, versioningDisabled } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { changedFields, recordAudit } from '../audit/service.ts';
import * as files from '../files/repo.ts';
import type { FileObject } from '../files/schemas.ts';
import {
  type PresignedUrl,
  presignDownload,
  requireReady,
  urlLifetimeSeconds,
  visibleFile,
} from '../files/service.ts';
import type { IngestService } from '../ingest/service.ts';
import {
  deleteVersion,
  type FileVersion,
  findVersion,
  listVersions,
  newestVersionId,
  versionBeforeNewest,
} from './repo.ts';

export function createVersionService(deps: { db: Db; store: ObjectStore; ingest: IngestService }) {
  const { db, store, ingest } = deps;

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
        const updated = await ingest.restore(q, caller.project, file, version);
        const content = (row: typeof file) => ({
          size_bytes: row.size_bytes,
          content_type: row.content_type,
          checksum_sha256: row.checksum_sha256,
        });
        await recordAudit(q, audit, {
          action: 'file.restore',
          projectId: caller.project.id,
          targets: { file_id: file.id, version_id: version.id },
          ...changedFields(content(file), content(updated)),
        });
        return files.toFileObject(updated);
      });
    },

    /**
     * Removes an earlier version for good; its object is collected after the grace period unless the
     * file still holds it. The newest version is the file's content: it goes only with the file, or,
     * `newest: 'reinstate'` (S3's way), the version before it becomes the file's content again; a
     * file with no version before it is left as it is, answered `undefined`, for its caller to delete.
     */
    async remove(
      caller: Caller,
      fileId: string,
      versionId: string,
      audit: AuditContext,
      { newest = 'refuse' }: { newest?: 'refuse' | 'reinstate' } = {},
    ): Promise<FileVersion | undefined> {
      return db.tx(async (q) => {
        let file = await fileOf(caller, fileId, q, true);
        if (file.legal_hold) throw legalHold();
        const version = await versionOf(q, file.id, versionId);
        if ((await newestVersionId(q, file.id)) === version.id) {
          if (newest === 'refuse') {
            throw invalidState("The newest version is the file's content: delete the file instead", {
              version_id: version.id,
            });
          }
          const before = await versionBeforeNewest(q, file.id);
          if (!before) return undefined;
          file = await ingest.restore(q, caller.project, file, before, { recorded: false });
        }
        const removed = await deleteVersion(q, file.id, version.id);
        if (removed?.last && removed.storage_key !== file.storage_key) {
          await files.retireObject(q, file.project_id, removed.storage_key);
        }
        await recordAudit(q, audit, {
          action: 'file.version.delete',
          projectId: caller.project.id,
          targets: { file_id: file.id, version_id: version.id },
        });
        return version;
      });
    },

    /** A presigned URL for new bytes of a ready file; the current content stays served until they are confirmed. */
    async createContent(
      caller: Caller,
      fileId: string,
      request: { content_type?: string; size_bytes: number },
    ) {
      const file = await fileOf(caller, fileId);
      const declared = await ingest.declareContent(caller, file, request);
      return {
        version_id: declared.version_id,
        file_id: file.id,
        upload_url: declared.upload_url,
        expires_at: declared.expires_at.toISOString(),
      };
    },

    /** Checks the uploaded bytes; they become current at once, or after the scan when the project scans. */
    async confirmContent(caller: Caller, fileId: string, contentId: string) {
      const file = await fileOf(caller, fileId);
      const outcome = await ingest.confirmContent(caller, file, contentId);
      return { ...outcome, file: files.toFileObject(outcome.file) };
    },
  };
}

export type VersionService = ReturnType<typeof createVersionService>;
