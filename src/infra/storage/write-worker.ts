import { createHash, type Hash } from 'node:crypto';
import { closeSync, fdatasyncSync, fstatSync, openSync, readSync, writevSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { fileIdentity } from './file-identity.ts';

/**
 * Messages of writer-pool.ts. An upload is an `open`, its `chunks` in order, then `end` or `abort`.
 * A digest of files is a `digest`, its `file`s in order, then `end` (answering the digest) or `abort`.
 */
export type WriterRequest =
  /** `algorithm` null: the bytes are only written (their digest is answered empty). */
  | { type: 'open'; id: number; fd: number; algorithm: 'sha256' | 'md5' | null }
  /** `loan`: the chunks (by index) whose memory goes back once written (see wanted-back.ts). */
  | { type: 'chunks'; id: number; data: Uint8Array[]; loan?: { id: number; indices: number[] } }
  | { type: 'digest'; id: number; algorithm: 'sha256' | 'md5' }
  | { type: 'file'; id: number; path: string }
  | { type: 'end'; id: number }
  | { type: 'abort'; id: number };

export type WriterReply =
  | { type: 'ack'; id: number; bytes: number }
  | { type: 'hashed'; id: number; size: number; identity: string }
  | { type: 'done'; id: number; digest: string }
  | { type: 'aborted'; id: number }
  /** The memory of a `chunks` message's loaned chunks, in their order. */
  | { type: 'returned'; loan: number; data: ArrayBuffer[] }
  /** `code`: the system error's (ENOSPC…), so that the store can tell a full disk from other failures. */
  | { type: 'error'; id: number; message: string; code?: string };

const READ_SIZE = 1024 * 1024;
/** An upload writes into its descriptor; a digest only reads files (fd -1). */
const jobs = new Map<number, { fd: number; hash?: Hash; position: number }>();
const port = parentPort!;
let readBuffer: Buffer | undefined;

/** Feeds the whole file at `path` to `hash` through one reused buffer; returns its size and identity. */
function hashFile(hash: Hash, path: string): { size: number; identity: string } {
  readBuffer ??= Buffer.allocUnsafeSlow(READ_SIZE);
  const fd = openSync(path, 'r');
  try {
    let size = 0;
    for (let read = readSync(fd, readBuffer); read > 0; read = readSync(fd, readBuffer)) {
      hash.update(readBuffer.subarray(0, read));
      size += read;
    }
    // Of the very file read (a replacement renamed over the path meanwhile is another file).
    return { size, identity: fileIdentity(fstatSync(fd)) };
  } finally {
    closeSync(fd);
  }
}

/** Writes `chunks` at `position` in as few system calls as the file takes them. */
function writeAll(fd: number, chunks: Uint8Array[], position: number): void {
  let rest = chunks;
  while (rest.length > 0) {
    let written = writevSync(fd, rest, position);
    position += written;
    // A short write: the rest of the chunk it stopped in, then the chunks after it.
    let index = 0;
    while (index < rest.length && written >= rest[index]!.length) written -= rest[index++]!.length;
    rest = rest.slice(index);
    if (written > 0) rest[0] = rest[0]!.subarray(written);
  }
}

/**
 * Frees the memory of chunks moved here once they are written (or refused). Left to this thread's
 * garbage collector, it went only once some 64 MiB had gathered (V8 collects for memory outside its
 * heap past that), and the main thread's malloc heap, where a socket's reads are allocated, kept
 * those 64 MiB resident for good: glibc gives back the free memory at the top of its heap, not what
 * lies below memory still in use.
 */
function release(chunks: Uint8Array[]): void {
  for (const chunk of chunks) {
    const buffer = chunk.buffer as ArrayBuffer;
    if (!buffer.detached) buffer.transfer(0);
  }
}

/** The loaned chunks of a `chunks` message go back to the thread they came from, the others are freed. */
function settle(message: Extract<WriterRequest, { type: 'chunks' }>): void {
  const { loan } = message;
  if (loan) {
    const data = loan.indices.map((index) => message.data[index]!.buffer as ArrayBuffer);
    port.postMessage({ type: 'returned', loan: loan.id, data } satisfies WriterReply, data);
  }
  release(message.data);
}

function handle(message: WriterRequest): void {
  if (message.type === 'open' || message.type === 'digest') {
    const fd = message.type === 'open' ? message.fd : -1;
    const hash = message.algorithm ? createHash(message.algorithm) : undefined;
    jobs.set(message.id, { fd, hash, position: 0 });
    return;
  }
  if (message.type === 'abort') {
    // Every earlier message of the job has been handled: its descriptor may now be closed and reused.
    jobs.delete(message.id);
    port.postMessage({ type: 'aborted', id: message.id } satisfies WriterReply);
    return;
  }
  const job = jobs.get(message.id);
  if (!job) return; // failed already
  if (message.type === 'chunks') {
    let bytes = 0;
    for (const data of message.data) {
      job.hash?.update(data);
      bytes += data.length;
    }
    writeAll(job.fd, message.data, job.position);
    job.position += bytes;
    port.postMessage({ type: 'ack', id: message.id, bytes } satisfies WriterReply);
  } else if (message.type === 'file') {
    port.postMessage({
      type: 'hashed',
      id: message.id,
      ...hashFile(job.hash!, message.path),
    } satisfies WriterReply);
  } else if (message.type === 'end') {
    if (job.fd >= 0) fdatasyncSync(job.fd);
    jobs.delete(message.id);
    port.postMessage({
      type: 'done',
      id: message.id,
      digest: job.hash?.digest('hex') ?? '',
    } satisfies WriterReply);
  }
}

port.on('message', (message: WriterRequest) => {
  try {
    handle(message);
  } catch (error) {
    jobs.delete(message.id);
    port.postMessage({
      type: 'error',
      id: message.id,
      message: (error as Error).message,
      code: (error as NodeJS.ErrnoException).code,
    } satisfies WriterReply);
  } finally {
    if (message.type === 'chunks') settle(message);
  }
});
