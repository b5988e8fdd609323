import { openAsBlob } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { invalidInput } from '../errors.js';
import { chunksOf, commonSource, streamSource, type UploadInput, type UploadSource } from '../source.js';

/** What the Node.js entry uploads: the browser inputs, a file path (string or file: URL), a Node stream. */
export type NodeUploadInput = UploadInput | string | URL | Readable | AsyncIterable<Uint8Array>;

/** A file on disk as a Blob that reads it lazily, with its name and modification time. */
async function pathSource(path: string): Promise<UploadSource> {
  const info = await stat(path).catch((error: NodeJS.ErrnoException) => {
    throw invalidInput(`Cannot read ${path}: ${error.code ?? error.message}`, { path });
  });
  if (!info.isFile()) throw invalidInput(`${path} is not a file`, { path });
  const blob = await openAsBlob(path);
  return {
    size: blob.size,
    name: basename(path),
    lastModified: Math.trunc(info.mtimeMs),
    read: async (start, end) => blob.slice(start, end),
    finish: async () => {},
  };
}

/** Node streams may yield strings (after setEncoding): bytes are what is uploaded. */
async function* asBytes(stream: AsyncIterable<Uint8Array | string>): AsyncGenerator<Uint8Array> {
  for await (const chunk of stream) yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
}

export async function nodeSource(input: NodeUploadInput, size: number | undefined): Promise<UploadSource> {
  if (typeof input === 'string') return pathSource(input);
  if (input instanceof URL) return pathSource(fileURLToPath(input));
  const isStream =
    input instanceof Readable || (!(input instanceof Blob) && Symbol.asyncIterator in Object(input));
  if (!isStream) return commonSource(input as UploadInput, size);
  if (size === undefined) throw invalidInput('size is required to upload a stream');
  const source = streamSource(chunksOf(asBytes(input as AsyncIterable<Uint8Array>)), size);
  // An fs.ReadStream knows its file's name.
  const path = (input as { path?: unknown }).path;
  return typeof path === 'string' ? { ...source, name: basename(path) } : source;
}
