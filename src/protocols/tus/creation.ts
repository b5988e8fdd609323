import { Readable } from 'node:stream';
import { fileTooLarge, isDomainError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import { MAX_PART_SIZE } from '../../infra/storage/object-store.ts';
import { newId } from '../../lib/ids.ts';
import type * as files from '../../modules/files/repo.ts';
import type { IngestService } from '../../modules/ingest/service.ts';
import { MAX_OBJECT_BYTES } from '../../modules/projects/schemas.ts';
import type { MultipartService } from '../../modules/uploads/multipart.ts';
import type { Append, Body } from './append.ts';
import { pastMaxObject, uploadRequestOf } from './protocol.ts';
import { creatorOf, type UploadLookup, type UploadState } from './state.ts';
import { insertUpload, type TusUploadRow } from './upload-repo.ts';

/**
 * The creation of a tus upload: its file declared, written at once when the whole file came with it,
 * else made a multipart session whose first bytes the creation may bring.
 */
export function createUploadCreation(deps: {
  db: Db;
  ingest: IngestService;
  multipart: MultipartService;
  lookup: UploadLookup;
  append: Append;
  terminate: (caller: Caller, id: string) => Promise<void>;
}) {
  const { db, ingest, multipart, lookup, append, terminate } = deps;
  const { load, stateOf, head } = lookup;

  return {
    /**
     * POST /tus: declares the file (with its length, or with the length deferred), then stores the bytes
     * that came with it. A whole file in one request is written at once, with no parts.
     */
    async create(
      caller: Caller,
      request: { length?: number; metadata?: string; body?: Body },
    ): Promise<UploadState> {
      const declared = uploadRequestOf(request.metadata);
      const { length, body } = request;
      const metadata = request.metadata ?? null;
      if (length !== undefined && length > MAX_OBJECT_BYTES) throw pastMaxObject();
      const created_by = creatorOf(caller);
      const size = body ? body.size : 0;
      if (length !== undefined && size !== undefined && size > length) {
        throw fileTooLarge(length, 'upload', 'Upload-Length');
      }
      if (length !== undefined && size === length && length <= MAX_PART_SIZE) {
        const id = newId('session');
        const record = (q: Parameters<typeof insertUpload>[0], file: files.FileRow) =>
          insertUpload(q, {
            id,
            project_id: caller.project.id,
            file_id: file.id,
            session_id: null,
            created_by,
            upload_length: length,
            upload_offset: length,
            metadata,
          });
        const file = await ingest.writeFile(
          caller,
          { ...declared, size_bytes: length, size_field: 'Upload-Length' },
          body?.stream ?? Readable.from([]),
          { record },
        );
        return { id, fileId: file.id, offset: length, length, metadata };
      }
      const started =
        length === undefined
          ? await multipart.startDeferred(caller, declared)
          : await multipart
              .start(caller, { ...declared, total_size_bytes: length, size_field: 'Upload-Length' })
              .then((begun) => ({ uploadId: begun.upload_id, file: { id: begun.file_id } }));
      const row = {
        id: started.uploadId,
        project_id: caller.project.id,
        file_id: started.file.id,
        session_id: started.uploadId,
        created_by,
        upload_length: length ?? null,
        upload_offset: 0,
        metadata,
      };
      await insertUpload(db, row).catch(async (error: unknown) => {
        await multipart.abort(caller, started.uploadId).catch(() => undefined);
        throw error;
      });
      const { session } = await load(caller, row.id);
      const upload: TusUploadRow = { ...row, parts: [], next_part: 1, tail: [] };
      const state = stateOf(upload, 0, session?.session.expires_at);
      if (!body || size === 0) return state;
      // The upload exists whatever becomes of its first bytes: the answer says how many it kept. A
      // body longer than the upload may take (which one sent chunked shows only as it arrives) is
      // refused as it is when its length is sent, the upload made for it terminated.
      return append(caller, upload, session!, 0, body, undefined).catch(async (error: unknown) => {
        if (!isDomainError(error, 'FILE_TOO_LARGE')) return head(caller, row.id);
        // One that cannot be terminated now is left to expire: the body is refused either way.
        await terminate(caller, row.id).catch(() => undefined);
        throw error;
      });
    },
  };
}
