import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { ByteRange, ObjectInfo } from '../object-store.ts';

/**
 * Where the bytes of a local object lie (one file, stretches of an assembled object's segments, or
 * within its sidecar), for readers that send them from the files, and as the stream `read` answers.
 */

/** How much of an object's file is read at a time, streamed or sent. */
export const BUFFER_SIZE = 1024 * 1024;

/** Bytes `start`..`end` (inclusive) of the file at `path`; `bytes` are they, when already read. */
export interface Slice {
  path: string;
  start: number;
  end: number;
  bytes?: Buffer;
}

/** An object of the local store: what head() tells, and where its bytes lie. */
export interface Located extends ObjectInfo {
  /** The bytes of `range` (default: all), in order. */
  slices(range?: ByteRange): Slice[];
}

/** The bytes of `slices` (see Located), in order, as one stream: what `read` answers. */
export function sliceStream(slices: Slice[]): Readable {
  return Readable.from(
    (async function* () {
      for (const { bytes, ...slice } of slices) {
        if (bytes) yield bytes;
        else yield* createReadStream(slice.path, { ...slice, highWaterMark: BUFFER_SIZE });
      }
    })(),
  );
}
