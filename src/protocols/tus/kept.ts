import { Readable } from 'node:stream';
import { isDomainError } from '../../domain/errors.ts';
import { forget, wantBack } from '../../infra/storage/wanted-back.ts';

/**
 * The most bytes all PATCHes of the process hold at once to keep what a dropped connection carried
 * of the part in flight: 256 MiB, sixteen PATCHes at the usual 16 MiB part. A PATCH past it is cut
 * into parts as before, keeping only its whole parts, so that memory stays flat however many uploads
 * come at once; the first sixteen are the usual few a node serves, and a client whose PATCH went
 * without keeping keeps its bytes on a later one.
 */
export const KEPT_BUDGET = 256 * 1024 * 1024;
/** What a stream reads ahead of the part it feeds (Readable.from: 16 chunks of at most 64 KiB). */
const READ_AHEAD = 2 * 1024 * 1024;
/**
 * The most one PATCH holds: a usual part and what is read ahead of it. A larger part (an upload past
 * 150 GiB, or one whose length is deferred, cut by its caller's limit) is not held: it would take a
 * sixteenth of the budget many times over.
 */
const MOST_HELD = 16 * 1024 * 1024 + READ_AHEAD;

let reserved = 0;

/**
 * Whether a request's body failed because its connection did (dropped, reset, timed out), rather
 * than because Coffer ended it (its lock taken over).
 */
export const connectionLost = (body: Readable): boolean => {
  const error = body.errored;
  return error !== null && error !== undefined && !isDomainError(error);
};

/** A chunk held; `returned` once a writer thread moved its memory away and back (see wanted-back.ts). */
interface Held {
  chunk: Buffer;
  returned: boolean;
}

/**
 * A PATCH's body, passed on as it arrives, with the Buffers of its part in flight held (Node hands
 * each read as a Buffer of its own: holding them copies nothing) until that part is recorded, so
 * that the bytes a dropped connection carried of its unfinished part can still be stored. The local
 * store's writer thread, which moves a chunk's memory to write it, gives it back.
 */
export class KeptBody {
  /** The body's bytes, for the store. */
  readonly stream: Readable;
  readonly #room: number;
  #chunks: Held[] = [];
  /** Where the first chunk held starts, counted from the body's first byte. */
  #start = 0;
  #held = 0;
  #keeping = true;
  #closed = false;
  /** Bytes of the rest (see rest) the store took in. */
  #fed = 0;

  private constructor(body: Readable, room: number) {
    this.#room = room;
    const kept = this;
    // Not destroyed when the store stops reading: the request still gets its answer.
    const chunks = body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>;
    this.stream = Readable.from(
      (async function* () {
        for await (const chunk of chunks) {
          kept.#hold(chunk);
          yield chunk;
        }
      })(),
    );
  }

  /**
   * `body` kept within the process's budget, holding at most a part of `partSize` bytes (or the
   * body's `size`) at a time; nothing when the budget is spent (the body is then cut as before).
   */
  static of(body: Readable, size: number, partSize: number): KeptBody | undefined {
    const room = Math.min(size, partSize + READ_AHEAD);
    if (room > MOST_HELD || reserved + room > KEPT_BUDGET) return undefined;
    reserved += room;
    return new KeptBody(body, room);
  }

  /** The body's bytes up to `position` are stored and recorded: no longer held. */
  settle(position: number): void {
    while (this.#chunks.length > 0 && this.#start + this.#chunks[0]!.chunk.length <= position) {
      const held = this.#chunks.shift()!;
      this.#start += held.chunk.length;
      this.#held -= held.chunk.length;
      free(held);
    }
  }

  /** The bytes received from `position` on (nothing when they were not all held), then holds no more. */
  rest(position: number): { stream: Readable; size: number } | undefined {
    this.settle(position);
    const held = this.#chunks;
    // A chunk whose memory a writer still holds (its thread stopped) leaves a gap: nothing is kept.
    const whole = this.#keeping && held.every(({ chunk }) => !(chunk.buffer as ArrayBuffer).detached);
    if (!whole || held.length === 0) {
      this.#drop();
      return undefined;
    }
    this.#chunks = [];
    this.#drop();
    for (const { chunk } of held) forget(chunk);
    const chunks = held.map(({ chunk }) => chunk);
    chunks[0] = chunks[0]!.subarray(position - this.#start);
    const size = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
    const kept = this;
    const stream = Readable.from(
      (async function* () {
        for (const chunk of chunks) {
          kept.#fed += chunk.length;
          yield chunk;
        }
      })(),
    );
    return { stream, size };
  }

  /**
   * The bytes of the rest the store took in: progress of a PATCH whose connection dropped, so that
   * its lock is not taken over as stalled while they are stored.
   */
  get fed(): number {
    return this.#fed;
  }

  /** Gives the room back to the budget. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#drop();
    reserved -= this.#room;
  }

  #hold(chunk: Buffer) {
    if (!this.#keeping) return;
    const held: Held = { chunk, returned: false };
    wantBack(chunk, (memory) => {
      held.chunk = Buffer.from(memory);
      held.returned = true;
    });
    this.#chunks.push(held);
    this.#held += chunk.length;
    // More than a part held means a store reading ahead of its part: past the room, nothing is kept.
    if (this.#held > this.#room) this.#drop();
  }

  #drop() {
    this.#keeping = false;
    for (const held of this.#chunks) free(held);
    this.#chunks = [];
    this.#held = 0;
  }
}

/**
 * No longer held: memory given back is freed at once, as the writer thread frees what it wrote (left
 * to the garbage collector, it stays resident in the heap the socket reads are allocated from).
 */
function free(held: Held): void {
  forget(held.chunk);
  if (held.returned) (held.chunk.buffer as ArrayBuffer).transfer(0);
}
