import { Readable } from 'node:stream';
import { badRequest, fileTooLarge } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import {
  MAX_PART_NUMBER,
  MAX_PART_SIZE,
  MIN_PART_SIZE,
  type ObjectStore,
} from '../../infra/storage/object-store.ts';
import { newObjectKey } from '../../modules/ingest/rules.ts';
import type { IngestService } from '../../modules/ingest/service.ts';
import type { MultipartService } from '../../modules/uploads/multipart.ts';
import { ByteCutter } from './cutter.ts';
import { expiryWhileWriting } from './expiry.ts';
import { connectionLost, KeptBody } from './kept.ts';
import { type Incoming, LetGo, lockUpload } from './lock.ts';
import { offsetMismatch, uploadGone, uploadLocked } from './protocol.ts';
import { Spool } from './spool.ts';
import type { UploadLookup, UploadState } from './state.ts';
import { dropTail, retire } from './tails.ts';
import { recordProgress, type StoredPart, type TailPiece, type TusUploadRow } from './upload-repo.ts';

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
 * A PATCH's bytes stored at its upload's offset under its lock: cut into parts, what is too small for
 * a part of its own waiting as small objects of the store, the last PATCH completing the upload.
 */
export function createAppend(deps: {
  db: Db;
  store: ObjectStore;
  ingest: IngestService;
  multipart: MultipartService;
  lookup: UploadLookup;
}) {
  const { db, store, ingest, multipart, lookup } = deps;
  const { load, stateOf } = lookup;

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
    // The bytes of the part in flight are held, so that a connection that drops keeps them too.
    const kept = body.size
      ? KeptBody.of(
          body.stream,
          body.size,
          partSize(upload.upload_length ?? session.session.total_size_bytes),
        )
      : undefined;
    const bytes = kept?.stream ?? body.stream;
    let staged: ReturnType<typeof multipart.stagePart> | undefined;
    // A chunked body is stored from a temporary file, a dropped one's rest from memory: the store
    // reading either is progress too.
    let spool: Spool | undefined;
    const incoming = {
      stream: body.stream,
      received: () => body.received() + (spool?.fed ?? 0) + (kept?.fed ?? 0),
      arrived: body.arrived,
    };
    let lock: Awaited<ReturnType<typeof lockUpload>>;
    let expiry: ReturnType<typeof expiryWhileWriting>;
    try {
      // The usual PATCH, one whole part, has its bytes written while the lock is taken and the part
      // granted: its number matters only once it is placed. Whatever fails on the way drops them.
      staged = stageable(upload, offset, body, declaredLength)
        ? multipart.stagePart(session.session, bytes, body.size!, { md5: false })
        : undefined;
      expiry = expiryWhileWriting(multipart, session.session);
      lock = await lockUpload(db, upload.id, incoming, expiry.progressed);
    } catch (error) {
      void staged?.discard();
      kept?.close();
      throw error;
    }
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
            kept?.settle(at.offset - offset);
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
          if (recorded) void dropTail(store, consumed);
          at = { offset: reached, tail: [], parts, nextPart: at.nextPart + (part ? 1 : 0) };
          kept?.settle(at.offset - offset);
          remaining -= size;
          if (last) {
            if (recorded && final) held = false;
            return;
          }
        }
      }

      /**
       * What `write` stored when the connection dropped on the way, and the bytes it carried past
       * that (`rest`, from the offset recorded): stored as the request's last bytes, as a tail or
       * parts as any bytes are, so that the next PATCH goes on from there. A refusal, or a body
       * Coffer ended (its lock taken over), keeps nothing more.
       */
      async function keepingCut(
        write: () => Promise<void>,
        rest: () => { stream: Readable; size: number } | undefined,
      ) {
        try {
          await write();
        } catch (error) {
          // A HEAD sent meanwhile (its client resuming) waits for these bytes rather than answer without them.
          const lost = connectionLost(body.stream);
          if (lost) await lock.lettingGo().catch(() => undefined);
          const cut = lost && (await goneIfEnded(caller, upload.id, error)) === error;
          const carried = cut ? rest() : undefined;
          // Stored as a part of its own when large enough: only while the numbers left still hold the
          // rest of the upload in whole parts.
          const fits = (size: number) =>
            at.nextPart + Math.ceil((limit - at.offset - size) / segment) < MAX_PART_NUMBER;
          if (carried && fits(carried.size))
            await put(carried.stream, carried.size, true).catch(() => undefined);
          throw error;
        }
      }

      if (body.size !== undefined) {
        await keepingCut(
          () => put(bytes, body.size!, true),
          () => kept?.rest(at.offset - offset),
        );
      } else {
        // A body sent without its length (chunked): received a part at a time into a temporary file,
        // each then stored as if it had come alone, so that every size the store is given is exact
        // and memory holds none of it. Each fills a part with the bytes waiting before it, as a body
        // with its length is cut. More than the upload may still take is refused before the piece
        // that goes past it is stored.
        spool = await Spool.open();
        const pieces = new ByteCutter(body.stream);
        let room = limit - offset;
        for (let ended = false; !ended; ) {
          const most = Math.min(segment - sizeOf(at.tail), room);
          let piece = { size: 0, ended: false };
          await keepingCut(
            async () => {
              piece = await spool!.fill(pieces, most);
            },
            // What reached the temporary file of the piece it was filling.
            () =>
              spool!.filled > 0 ? { stream: spool!.read(spool!.filled), size: spool!.filled } : undefined,
          );
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
      // Let go, its bytes stored: its client stopped sending (the answer reaches nobody).
      if (body.stream.errored instanceof LetGo) throw uploadLocked();
      throw await goneIfEnded(caller, upload.id, error);
    } finally {
      void staged?.discard();
      await spool?.close().catch(() => undefined);
      kept?.close();
      await lock.release(held);
    }
  }

  return append;
}

export type Append = ReturnType<typeof createAppend>;

/** The bytes waiting as small objects, then the body's. */
async function* joined(store: ObjectStore, tail: TailPiece[], body: Readable): AsyncGenerator<Buffer> {
  for (const piece of tail) yield* (await store.read(piece.key)) as AsyncIterable<Buffer>;
  yield* body;
}
