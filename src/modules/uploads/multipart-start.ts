import type { Config } from '../../config.ts';
import type { Caller } from '../../domain/principal.ts';
import { MIN_PART_SIZE, type ObjectStore } from '../../infra/storage/object-store.ts';
import { newId } from '../../lib/ids.ts';
import type * as files from '../files/repo.ts';
import type { ContentRequest } from '../ingest/content.ts';
import type { ByteSource, UploadRequest } from '../ingest/intake.ts';
import type { IngestService } from '../ingest/service.ts';
import { insertSession } from './session-repo.ts';

/**
 * How a multipart upload starts: its file declared through the upload core, with the store's upload
 * and its session made for its bytes.
 */
export function createMultipartStart(deps: { config: Config; store: ObjectStore; ingest: IngestService }) {
  const { config, store, ingest } = deps;

  /**
   * The bytes of a multipart upload: the store's upload, made before the file is recorded, and its
   * session recorded with it. `sizeLimit` marks a deferred size (the session holds the limit, not a
   * total); `tags` and `keyed`, as SessionRow has them.
   */
  function partsSource(
    expiresAt: Date,
    { sizeLimit, tags, keyed = false }: { sizeLimit?: number; tags?: string[]; keyed?: boolean } = {},
  ): ByteSource<string, string> {
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
          tags: tags ?? null,
          keyed,
        });
        return id;
      },
    };
  }

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
     * its size, with the quota, settled when it completes. Its tags are the session's too, for the
     * file it may end in instead of its own. `keyed`: made at an S3 key (see SessionRow).
     */
    async startDeferred(caller: Caller, request: Omit<UploadRequest, 'size_bytes'>, { keyed = false } = {}) {
      const expiresAt = new Date(Date.now() + config.multipartExpirySeconds * 1000);
      const limit = await ingest.sizeLimit(caller);
      const tags = request.tags && (await ingest.writtenTags(caller, request.tags));
      const { file, extra: uploadId } = await ingest.declare(
        caller,
        { ...request, size_bytes: 0 },
        partsSource(expiresAt, { sizeLimit: limit, tags, keyed }),
        { uploadExpiresAt: expiresAt },
      );
      return { uploadId: uploadId!, file };
    },

    /**
     * startDeferred for new content of a ready file (an S3 multipart upload to a key that holds one):
     * the file keeps its content until the upload completes, then gets the new one as a PUT would give
     * it, and `tags`, when given, with it.
     */
    async startContentDeferred(
      caller: Caller,
      file: files.FileRow,
      request: Omit<ContentRequest, 'size_bytes'>,
      tags?: string[],
    ) {
      const expiresAt = new Date(Date.now() + config.multipartExpirySeconds * 1000);
      const limit = await ingest.sizeLimit(caller);
      const written = tags && (await ingest.writtenTags(caller, tags));
      const { extra: uploadId } = await ingest.declareContentParts(
        caller,
        file,
        request,
        partsSource(expiresAt, { sizeLimit: limit, tags: written }),
        expiresAt,
      );
      return { uploadId: uploadId! };
    },
  };
}
