import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import type { IngestService } from '../../modules/ingest/service.ts';
import type { MultipartService } from '../../modules/uploads/multipart.ts';
import { type Body, createAppend } from './append.ts';
import { createUploadCreation } from './creation.ts';
import { createUploadLookup } from './state.ts';
import { dropTail, retire } from './tails.ts';
import { deleteUpload } from './upload-repo.ts';

/**
 * Whether a body carries no bytes. One sent chunked is read up to its first byte: tus-java-client
 * sends one without bytes at the end of an upload whose length is a multiple of its request size (an
 * empty one too). The request is not destroyed, so that a refusal is still answered.
 */
async function carriesNothing(body: Body): Promise<boolean> {
  if (body.size !== undefined) return body.size === 0;
  for await (const chunk of body.stream.iterator({ destroyOnReturn: false })) {
    if ((chunk as Buffer).length > 0) return false;
  }
  return true;
}

/**
 * tus uploads on the upload core: the file is declared at creation (rules, token count, quota
 * reservation, file.uploaded), its bytes become the parts of a multipart session, and the last
 * PATCH completes it as a REST multipart upload completes. What is received after the last part and
 * is too small for a part of its own (the store's 5 MiB minimum) waits as small objects of the store,
 * listed with the offset in the database, until the next part takes them in.
 */
export function createTusUploads(deps: {
  db: Db;
  store: ObjectStore;
  ingest: IngestService;
  multipart: MultipartService;
}) {
  const { db, store, ingest, multipart } = deps;
  const lookup = createUploadLookup({ db, multipart });
  const { load, finishedState, requireOpen, head } = lookup;
  const append = createAppend({ db, store, ingest, multipart, lookup });

  /**
   * DELETE: terminates an unfinished upload (its file failed, its parts and quota released), or
   * forgets a finished one, whose file stays.
   */
  async function terminate(caller: Caller, id: string): Promise<void> {
    const { upload, session } = await load(caller, id);
    if (session && session.status !== 'completed') {
      await multipart.abort(caller, requireOpen(session).session.id);
      return;
    }
    // Bytes still waiting (left by a last PATCH that could not record its part) go with the record.
    const tail = await db.tx(async (q) => {
      const left = (await deleteUpload(q, upload.project_id, upload.id)) ?? [];
      await retire(q, upload.project_id, left);
      return left;
    });
    void dropTail(store, tail);
  }

  return {
    ...createUploadCreation({ db, ingest, multipart, lookup, append, terminate }),

    head,

    /**
     * PATCH: `body` at `offset`; `length` sets a deferred length. An empty PATCH at the length of a
     * finished upload answers its state, as tusd does: a client that lost the answer to its last PATCH
     * and sends it again learns that the upload is done.
     */
    async patch(caller: Caller, id: string, request: { offset: number; body: Body; length?: number }) {
      const { upload, session, file } = await load(caller, id);
      if (!session || session.status === 'completed') {
        const state = finishedState(upload, file);
        const sameLength = request.length === undefined || request.length === state.length;
        if (request.offset === state.length && sameLength && (await carriesNothing(request.body)))
          return state;
      }
      return append(caller, upload, requireOpen(session), request.offset, request.body, request.length);
    },

    terminate,
  };
}

export type TusUploads = ReturnType<typeof createTusUploads>;
