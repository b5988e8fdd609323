import type { Caller } from '../../domain/principal.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import * as files from '../files/repo.ts';
import type { UploadRequest } from '../ingest/intake.ts';
import { checkSingleUploadSize } from '../ingest/rules.ts';
import type { IngestService } from '../ingest/service.ts';

/** The REST two-step upload: a presigned PUT URL at initiate, then confirm; both through the upload core. */
export function createUploadService(deps: { store: ObjectStore; ingest: IngestService }) {
  const { store, ingest } = deps;

  return {
    async initiate(caller: Caller, request: UploadRequest) {
      checkSingleUploadSize(request.size_bytes);
      const { file, made: url } = await ingest.declare(caller, request, {
        make: (planned) =>
          store.presignUpload(planned.storageKey, {
            size: planned.size,
            contentType: planned.contentType,
            expiresAt: planned.expiresAt,
          }),
        undo: (_url, planned) => store.delete(planned.storageKey),
      });
      return { file_id: file.id, upload_url: url, expires_at: file.upload_expires_at!.toISOString() };
    },

    /** Checks the uploaded object against the declaration, then moves the file out of `uploading`. */
    async confirm(caller: Caller, fileId: string) {
      return files.toFileObject(await ingest.confirm(caller, fileId));
    },
  };
}

export type UploadService = ReturnType<typeof createUploadService>;
