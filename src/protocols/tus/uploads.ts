import { Readable } from 'node:stream';
import {
  badRequest,
  fileTooLarge,
  forbidden,
  invalidState,
  isDomainError,
  notFound,
} from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import {
  MAX_PART_NUMBER,
  MAX_PART_SIZE,
  MIN_PART_SIZE,
  type ObjectStore,
} from '../../infra/storage/object-store.ts';
import { newId } from '../../lib/ids.ts';
import * as files from '../../modules/files/repo.ts';
import { visibleFile } from '../../modules/files/service.ts';
import { newObjectKey } from '../../modules/ingest/rules.ts';
import type { IngestService } from '../../modules/ingest/service.ts';
import { MAX_OBJECT_BYTES } from '../../modules/projects/schemas.ts';
import type { MultipartService } from '../../modules/uploads/multipart.ts';
import { ByteCutter } from './cutter.ts';
import { expiryWhileWriting } from './expiry.ts';
import { type Incoming, lockUpload, releaseStalledPatch } from './lock.ts';
import { offsetMismatch, pastMaxObject, uploadGone, uploadLocked, uploadRequestOf } from './protocol.ts';
import { Spool } from './spool.ts';
import {
  deleteUpload,
  findUpload,
  findUploadWithSession,
  insertUpload,
  recordProgress,
  type StoredPart,
  type TailPiece,
  type TusUploadRow,
} from './upload-repo.ts';

/** Bytes of a request, with their length when the request sent it (a chunked body's comes with its end). */
export interface Body extends Incoming {
  size: number | undefined;
}

/** Where a PATCH stands under its lock: the offset recorded, the bytes waiting, the parts stored. */
interface Position {
  offset: number;
  tail: TailPiece[];
  parts: StoredPart[];
  nextPart: number;
}

const sizeOf = (tail: TailPiece[]) => tail.reduce((sum, piece) => sum + piece.size, 0);

/** Where an upload stands, as HEAD and PATCH answer it. */
export interface UploadState {
  id: string;
  fileId: string;
  offset: number;
  /** Null while deferred. */
  length: number | null;
  metadata: string | null;
  /** When an unfinished upload expires without progress. */
  expiresAt?: Date;
}

/** The most bytes a PATCH stores as one part: small enough to keep what a dropped connection carried, large enough that `limit` bytes fit in the store's part count. */
const partSize = (limit: number) =>
  Math.min(MAX_PART_SIZE, Math.max(SEGMENT_BYTES, Math.ceil(limit / (MAX_PART_NUMBER - 1000))));
const SEGMENT_BYTES = 16 * 1024 * 1024;

/**
 * Whether a PATCH of `body` at `offset`, as `upload` stood before its lock, makes exactly one part
 * that is not the first (whose head is checked against the file's type): its length and the body's
 * known, nothing waiting before it, and at least the store's minimum unless it ends the upload.
 */
function stageable(upload: TusUploadRow, offset: number, body: Body, declaredLength: number | undefined) {
  const { size } = body;
  const length = upload.upload_length;
  if (length === null || declaredLength !== undefined || upload.next_part === 1) return false;
  if (size === undefined || size === 0 || offset !== upload.upload_offset || upload.tail.length > 0) {
    return false;
  }
  const end = offset + size;
  if (end > length || size > partSize(length)) return false;
  return end === length || size >= MIN_PART_SIZE;
}

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

/** Who may continue an upload: the credential that created it, or an upload token of the same owner. */
const creatorOf = (caller: Caller) => {
  const { principal } = caller;
  if (principal.kind === 'api_key') return principal.keyId;
  if (principal.kind === 'upload_token') return principal.tokenId;
  throw forbidden('tus uploads are made with an API key or an upload token');
};

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

  /** Waiting bytes that went into a part: collected after the grace period, and removed now if possible. */
  async function retire(q: Queryable, projectId: string, tail: TailPiece[]) {
    for (const piece of tail) await files.retireObject(q, projectId, piece.key);
  }
  const dropTail = async (tail: TailPiece[]) => {
    for (const piece of tail) await store.delete(piece.key).catch(() => undefined);
  };

  /** The caller's upload with its session and file; 404 for one of another credential. */
  async function load(caller: Caller, id: string) {
    const found = await findUploadWithSession(db, caller.project.id, id);
    if (!found) throw notFound('Upload');
    const { upload, file } = found;
    const creator = creatorOf(caller);
    if (upload.session_id === null) {
      // Written at once: the file's own check lets an upload token of the same owner in.
      if (upload.created_by !== creator) {
        if (caller.principal.kind !== 'upload_token') throw notFound('Upload');
        visibleFile(caller, file, { ofSameOwner: true });
      }
      return { upload, session: undefined, file };
    }
    // The session's own check lets an upload token of the same owner in, and nothing else of a token.
    const session = multipart.visibleSession(caller, found.session && { session: found.session, file });
    if (caller.principal.kind === 'api_key' && upload.created_by !== creator) throw notFound('Upload');
    return { upload, session, file: session.file };
  }

  const stateOf = (upload: TusUploadRow, offset: number, expiresAt?: Date): UploadState => ({
    id: upload.id,
    fileId: upload.file_id,
    offset,
    length: upload.upload_length,
    metadata: upload.metadata,
    expiresAt,
  });

  /** A finished upload's offset and length: its file's, whatever its last PATCH could record. */
  const finishedState = (upload: TusUploadRow, file: Awaited<ReturnType<typeof load>>['file']) => {
    const length = upload.upload_length ?? file?.size_bytes ?? upload.upload_offset;
    return stateOf({ ...upload, upload_length: length }, length);
  };

  /** Whether the upload may still take bytes: 410 once terminated or expired, 423 while it completes. */
  function requireOpen(session: Awaited<ReturnType<typeof load>>['session']) {
    if (!session) throw invalidState('The upload is complete', { status: 'completed' });
    if (session.status === 'aborted' || session.status === 'expired') throw uploadGone(session.status);
    // Clients retry a 423; they drop an upload whose PATCH or HEAD gets another 4xx.
    if (session.status === 'completing') throw uploadLocked();
    if (session.status !== 'open')
      throw invalidState(`The upload is ${session.status}`, { status: session.status });
    return session;
  }

  /**
   * A PATCH's failure as tus names it: 410 when the upload was terminated or expired while the PATCH
   * wrote it (the session refusing a part as no longer open, the store its parts as unknown), as any
   * later request is answered.
   */
  async function goneIfEnded(caller: Caller, id: string, error: unknown): Promise<unknown> {
    const status = await load(caller, id).then(
      ({ session }) => session?.status,
      () => undefined,
    );
    return status === 'aborted' || status === 'expired' ? uploadGone(status) : error;
  }

  /**
   * HEAD: the offset (a stalled PATCH of the upload is released first, so that it stands). A finished
   * upload's offset and length are its file's, whatever its last PATCH could record. One being
   * completed answers the offset recorded before its last PATCH: the completion may still fail, and a
   * client told the whole length would take the upload for done.
   */
  async function head(caller: Caller, id: string): Promise<UploadState> {
    const { upload, session, file } = await load(caller, id);
    if (!session || session.status === 'completed') return finishedState(upload, file);
    if (session.status === 'completing') return stateOf(upload, upload.upload_offset);
    requireOpen(session);
    await releaseStalledPatch(db, id);
    const current = (await findUpload(db, caller.project.id, id)) ?? upload;
    return stateOf(current, current.upload_offset, session.session.expires_at);
  }

  /**
   * Stores `body` at the upload's offset under its lock: as a part when, with the bytes waiting before
   * it, it makes one (at least the store's minimum, or the last bytes of the upload), else as one more
   * small object waiting for the next part; the last PATCH completes the file. Answers the new offset.
   */
  async function append(
    caller: Caller,
    upload: TusUploadRow,
    session: NonNullable<Awaited<ReturnType<typeof load>>['session']>,
    offset: number,
    body: Body,
    declaredLength: number | undefined,
  ): Promise<UploadState> {
    // The usual PATCH, one whole part, has its bytes written while the lock is taken and the part
    // granted: its number matters only once it is placed. Whatever fails on the way drops them.
    let staged = stageable(upload, offset, body, declaredLength)
      ? multipart.stagePart(session.session, body.stream, body.size!, { md5: false })
      : undefined;
    // A chunked body is stored from a temporary file: the store reading it is progress too.
    let spool: Spool | undefined;
    const incoming = { stream: body.stream, received: () => body.received() + (spool?.fed ?? 0) };
    const expiry = expiryWhileWriting(multipart, session.session);
    const lock = await lockUpload(db, upload.id, incoming, expiry.progressed).catch((error: unknown) => {
      void staged?.discard();
      throw error;
    });
    let held = true;
    try {
      const current = lock.upload;
      if (offset !== current.upload_offset) throw offsetMismatch(current.upload_offset);
      // A staged part was judged by the upload as read before the lock: a same offset implies the same
      // next part and no tail (both move it), checked anyway rather than assumed.
      if (staged && (current.next_part !== upload.next_part || current.tail.length > 0)) throw uploadLocked();
      let length = current.upload_length;
      // Past the limit a deferred upload's session was given (its creator's): named by the one that binds.
      const pastCallerLimit = () =>
        ingest.pastSizeLimit(caller, session.file, session.session.total_size_bytes, 'Upload-Length');
      if (declaredLength !== undefined) {
        if (length !== null && length !== declaredLength) {
          throw badRequest('Upload-Length cannot change once it is known', { field: 'Upload-Length' });
        }
        if (declaredLength < offset)
          throw badRequest('Upload-Length is below the offset', { field: 'Upload-Length' });
        if (declaredLength > session.session.total_size_bytes) throw await pastCallerLimit();
        length = declaredLength;
      }
      // The upload's length once known; while it is deferred, the caller's limit the session was given.
      const limit = length ?? session.session.total_size_bytes;
      const pastLimit = async () =>
        length === null ? pastCallerLimit() : fileTooLarge(limit, 'upload', 'Upload-Length');
      if (body.size !== undefined && offset + body.size > limit) throw await pastLimit();
      const segment = partSize(limit);
      let at: Position = { offset, tail: current.tail, parts: current.parts, nextPart: current.next_part };

      /**
       * Stores `size` bytes of `bytes` after `at` (and the bytes waiting there): cut into parts of
       * `segment` bytes, each recorded once stored, so that a connection that drops keeps every whole
       * part it carried; what is too small for a part waits as a small object. `final` when they end
       * the request: its last record releases the lock, and completes the upload at its length.
       */
      async function put(bytes: Readable, size: number, final: boolean): Promise<void> {
        const start = at.offset;
        const end = start + size;
        const done = final && length !== null && end === length;
        const source = at.tail.length === 0 ? bytes : Readable.from(joined(store, at.tail, bytes));
        const cutter = new ByteCutter(source);
        let remaining = sizeOf(at.tail) + size;
        for (;;) {
          const tailBytes = sizeOf(at.tail);
          if (!done && remaining < MIN_PART_SIZE) {
            // Too few bytes for a part: the new ones wait as a small object of their own.
            const fresh = remaining - tailBytes;
            let tail = at.tail;
            let written: string | undefined;
            if (fresh > 0) {
              written = newObjectKey(upload.project_id, upload.file_id);
              // Before any part, straight from the bytes; after one, what the cutter has not handed out yet.
              const piece = at.offset === start ? bytes : cutter.next(fresh);
              await store.write(written, piece, { size: fresh, contentType: 'application/octet-stream' });
              tail = [...at.tail, { key: written, size: fresh }];
            }
            const progress = { offset: end, tail, length, release: final };
            if (!(await recordProgress(db, upload.id, lock.id, at.offset, progress))) {
              if (written) await store.delete(written).catch(() => undefined);
              throw uploadLocked();
            }
            if (final) held = false;
            at = { ...at, offset: end, tail };
            return;
          }
          const size = Math.min(remaining, segment);
          const last = size === remaining;
          const stream = last && at.offset === start ? source : cutter.next(size);
          let part: StoredPart | undefined;
          if (size > 0 || at.parts.length === 0) {
            // The client never sees a part's ETag: the store may spare the MD5 it costs.
            const placing = staged?.place(caller, at.nextPart);
            staged = undefined;
            const etag = await (placing ??
              multipart.writePart(caller, session.session.id, at.nextPart, stream, size, {
                md5: false,
                typeField: 'filetype',
              }));
            part = { part_number: at.nextPart, etag, size };
          }
          const parts = part ? [...at.parts, part] : at.parts;
          const reached = at.offset + size - tailBytes;
          if (last && done) {
            // Completed before the offset is recorded: an offset at the length always means a committed file.
            await multipart.finish(
              caller,
              session.session.id,
              parts.map(({ part_number, etag }) => ({ part_number, etag })),
            );
          }
          const consumed = part ? at.tail : [];
          const progress = { offset: reached, part, tail: [], length, release: last && final };
          const record = (q: Queryable) => recordProgress(q, upload.id, lock.id, at.offset, progress);
          const recorded =
            consumed.length === 0
              ? await record(db)
              : await db.tx(async (q) => {
                  if (!(await record(q))) return false;
                  await retire(q, upload.project_id, consumed);
                  return true;
                });
          if (!recorded && !done) throw uploadLocked();
          if (recorded) void dropTail(consumed);
          at = { offset: reached, tail: [], parts, nextPart: at.nextPart + (part ? 1 : 0) };
          remaining -= size;
          if (last) {
            if (recorded && final) held = false;
            return;
          }
        }
      }

      if (body.size !== undefined) await put(body.stream, body.size, true);
      else {
        // A body sent without its length (chunked): received a part at a time into a temporary file,
        // each then stored as if it had come alone, so that every size the store is given is exact
        // and memory holds none of it. Each fills a part with the bytes waiting before it, as a body
        // with its length is cut. More than the upload may still take is refused before the piece
        // that goes past it is stored.
        spool = await Spool.open();
        const pieces = new ByteCutter(body.stream);
        let room = limit - offset;
        for (let ended = false; !ended; ) {
          const piece = await spool.fill(pieces, Math.min(segment - sizeOf(at.tail), room));
          ended = piece.ended;
          room -= piece.size;
          if (!ended && room === 0) throw await pastLimit();
          await put(spool.read(piece.size), piece.size, ended);
        }
      }
      if (length !== null && at.offset === length)
        return stateOf({ ...current, upload_length: length }, length);
      const expiresAt = await expiry.settle();
      return stateOf({ ...current, upload_length: length }, at.offset, expiresAt);
    } catch (error) {
      throw await goneIfEnded(caller, upload.id, error);
    } finally {
      void staged?.discard();
      await spool?.close().catch(() => undefined);
      await lock.release(held);
    }
  }

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
    void dropTail(tail);
  }

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

/** The bytes waiting as small objects, then the body's. */
async function* joined(store: ObjectStore, tail: TailPiece[], body: Readable): AsyncGenerator<Buffer> {
  for (const piece of tail) yield* (await store.read(piece.key)) as AsyncIterable<Buffer>;
  yield* body;
}
