/** What an upload reads its bytes from: a Blob or bytes (any order), or a stream (in order). */
import { invalidInput } from './errors.js';
import type { PutBody } from './transport.js';

export interface UploadSource {
  size: number;
  name?: string | undefined;
  type?: string | undefined;
  lastModified?: number | undefined;
  /** Bytes `start` to `end` (exclusive). A stream is read in ascending order; bytes skipped are dropped. */
  read(start: number, end: number): Promise<PutBody>;
  /** Throws when a stream holds more than `size` bytes; called once every byte was read. */
  finish(): Promise<void>;
}

/** What the browser entry uploads (the Node.js entry adds paths and Node streams). */
export type UploadInput = Blob | ArrayBuffer | ArrayBufferView | ReadableStream<Uint8Array>;

const noMore = async () => {};

export function blobSource(blob: Blob): UploadSource {
  const file = blob as Partial<File>;
  return {
    size: blob.size,
    name: file.name || undefined,
    type: blob.type || undefined,
    lastModified: file.lastModified,
    read: async (start, end) => blob.slice(start, end),
    finish: noMore,
  };
}

export function bytesSource(bytes: Uint8Array): UploadSource {
  return { size: bytes.byteLength, read: async (start, end) => bytes.subarray(start, end), finish: noMore };
}

/** The next chunk of a stream, undefined at its end. */
export type NextChunk = () => Promise<Uint8Array | undefined>;

export function chunksOf(stream: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): NextChunk {
  if ('getReader' in stream) {
    const reader = stream.getReader();
    return async () => {
      const { done, value } = await reader.read();
      return done ? undefined : value;
    };
  }
  const iterator = stream[Symbol.asyncIterator]();
  return async () => {
    const { done, value } = await iterator.next();
    return done ? undefined : value;
  };
}

/**
 * A stream of `size` bytes read in order: each read waits for the previous one, so parts handed
 * out in ascending order are cut from the stream in that order.
 */
export function streamSource(next: NextChunk, size: number): UploadSource {
  let position = 0;
  let pending: Uint8Array = new Uint8Array(0);
  let queue: Promise<unknown> = Promise.resolve();
  const inOrder = <T>(task: () => Promise<T>): Promise<T> => {
    const run = queue.then(task);
    queue = run.catch(() => {});
    return run;
  };
  /** Copies the next `count` bytes into `into` (or drops them). */
  const take = async (count: number, into?: Uint8Array) => {
    for (let filled = 0; filled < count; ) {
      if (pending.byteLength === 0) {
        const chunk = await next();
        if (!chunk) throw invalidInput(`The stream ended after ${position} bytes; size is ${size}`);
        pending = chunk;
      }
      const n = Math.min(count - filled, pending.byteLength);
      into?.set(pending.subarray(0, n), filled);
      pending = pending.subarray(n);
      filled += n;
      position += n;
    }
  };
  return {
    size,
    read: (start, end) =>
      inOrder(async () => {
        if (start < position) throw new Error(`stream read at ${start}, already at ${position}`);
        await take(start - position);
        const bytes = new Uint8Array(end - start);
        await take(bytes.byteLength, bytes);
        return bytes;
      }),
    finish: () =>
      inOrder(async () => {
        await take(size - position);
        while (pending.byteLength === 0) {
          const chunk = await next();
          if (!chunk) return;
          pending = chunk;
        }
        throw invalidInput(`The stream holds more than size (${size}) bytes`);
      }),
  };
}

/** A source for the inputs every platform takes; `size` is required for a stream. */
export function commonSource(input: UploadInput, size: number | undefined): UploadSource {
  if (input instanceof Blob) return blobSource(input);
  if (input instanceof ArrayBuffer) return bytesSource(new Uint8Array(input));
  if (ArrayBuffer.isView(input))
    return bytesSource(new Uint8Array(input.buffer, input.byteOffset, input.byteLength));
  if (input && typeof (input as ReadableStream).getReader === 'function') {
    if (size === undefined) throw invalidInput('size is required to upload a stream');
    return streamSource(chunksOf(input as ReadableStream<Uint8Array>), size);
  }
  throw invalidInput(
    'Unsupported upload input: give a Blob, File, ArrayBuffer, typed array or ReadableStream',
  );
}
