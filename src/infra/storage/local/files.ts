import { createHash } from 'node:crypto';
import { close as fsClose, open as fsOpen, read as fsRead } from 'node:fs';
import { type FileHandle, link, mkdir, open, readdir, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { randomSecret } from '../../../lib/secrets.ts';
import { StoreError } from '../object-store.ts';
import { type FileSink, writers } from '../writer-pool.ts';

/**
 * Files written by the local store: through a temp file in its `.tmp` folder (on the same filesystem,
 * so that renames are atomic), synced to disk before they are renamed into place.
 */

/** How long a body may be: exactly `exact` bytes when declared, and never more than `max`. */
export interface Limits {
  exact?: number;
  max: number;
}

/** Temp files this process is writing: never stale, however long their writer waits for bytes. */
const writing = new Set<string>();

/** Whether this process is writing the temp file at `path`. */
export const isBeingWritten = (path: string): boolean => writing.has(path);

/**
 * Creates a file in the temp folder, making the folder only when it is missing: looking for it before
 * every write cost a system call per upload, and it is only ever missing once.
 */
async function inTempFolder<T>(folder: string, create: () => Promise<T>): Promise<T> {
  try {
    return await create();
  } catch (error) {
    if (!isMissing(error)) throw error;
    await mkdir(folder, { recursive: true });
    return create();
  }
}

/** Whether a filesystem error says the path (or a folder on the way) does not exist. */
export function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** Tries at making a folder, or placing a file in it, while concurrent deletes prune the folders on the way. */
const PRUNE_RETRIES = 10;

/**
 * Creates `folder` and its parents. A delete prunes the folders its key leaves empty, and one pruning a
 * parent while this creates the folders below it fails the creation (ENOENT): it is made again.
 */
export async function makeFolder(folder: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await mkdir(folder, { recursive: true });
      return;
    } catch (error) {
      if (attempt >= PRUNE_RETRIES || !isMissing(error)) throw error;
    }
  }
}

/** The names in `folder`, none when it does not exist. */
export async function entries(folder: string): Promise<string[]> {
  return readdir(folder).catch((error) => (isMissing(error) ? [] : Promise.reject(error)));
}

/**
 * How much a first read of a line takes: far more than a sidecar's line, far less than an inline
 * object of the largest size, and all of a small one (a few KiB) with its line.
 */
const LINE_READ = 4096;
export const NEWLINE = 0x0a;

/**
 * The file at `path` up to and with its first newline (`line`), or all of it when it has none, and
 * what the same reads brought in after the line (`after`): the line needs no more than that, and
 * the bytes after it are at hand when they are few.
 */
export async function readLine(path: string): Promise<{ line: Buffer; after: Buffer }> {
  // The callback API, not a FileHandle: a sidecar is read on every GetObject, and a FileHandle's open,
  // read and close cost twice the CPU (its promise machinery and close tracking) for the same calls.
  const fd = await fileCall<number>((done) => fsOpen(path, 'r', done));
  try {
    let buffer = Buffer.allocUnsafe(LINE_READ);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        const grown = Buffer.allocUnsafe(buffer.length * 2);
        buffer.copy(grown);
        buffer = grown;
      }
      const into = buffer;
      const bytesRead = await fileCall<number>((done) =>
        fsRead(fd, into, length, into.length - length, length, done),
      );
      const end = buffer.subarray(0, length + bytesRead).indexOf(NEWLINE, length);
      if (end !== -1) {
        return { line: buffer.subarray(0, end + 1), after: buffer.subarray(end + 1, length + bytesRead) };
      }
      if (bytesRead === 0)
        return { line: buffer.subarray(0, length), after: buffer.subarray(length, length) };
      length += bytesRead;
    }
  } finally {
    await fileCall<void>((done) => fsClose(fd, done));
  }
}

/** A callback-style filesystem call as a promise. */
function fileCall<T>(call: (done: (error: Error | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

/** A full disk, or the owner's quota spent. */
const NO_SPACE = new Set(['ENOSPC', 'EDQUOT']);

/**
 * What the store throws for a failure of the filesystem: InsufficientStorage when there is no space
 * left, Unavailable for any other system error (EIO, EACCES, EROFS…), with the system error as the
 * cause (for the log, never for the answer: it names paths). Other errors pass unchanged, the body's
 * among them: Node's `aborted` for a connection that dropped is an ECONNRESET of no system call.
 */
export function storeFailure(error: unknown): unknown {
  const { code, syscall } = (error ?? {}) as NodeJS.ErrnoException;
  if (error instanceof StoreError || typeof code !== 'string' || !/^E[A-Z0-9]+$/.test(code)) return error;
  if (code === 'ECONNRESET' && syscall === undefined) return error;
  if (NO_SPACE.has(code)) {
    return new StoreError('InsufficientStorage', 'The store has no space left', undefined, { cause: error });
  }
  return new StoreError('Unavailable', 'The store folder cannot be read or written', undefined, {
    cause: error,
  });
}

/** Runs `work`, its filesystem errors turned into the store's (storeFailure). */
export async function failing<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw storeFailure(error);
  }
}

/** Bodies declared at most this long are gathered and written from the main thread (see smallSink). */
export const SMALL_BODY = 64 * 1024;

/** A body longer than `limits` allow: too large when undeclared, else not what was declared. */
function tooLong(limits: Limits): StoreError {
  return limits.exact === undefined
    ? new StoreError('TooLarge', `The request body exceeds ${limits.max} bytes`, { max_bytes: limits.max })
    : new StoreError('InvalidArgument', `The body is longer than the declared ${limits.exact} bytes`);
}

/** Throws when a complete body of `size` bytes is not the declared length. */
function checkComplete(size: number, limits: Limits): void {
  if (limits.exact !== undefined && size !== limits.exact) {
    throw new StoreError('InvalidArgument', `The body has ${size} bytes but ${limits.exact} were declared`);
  }
}

/** A small body (at most SMALL_BODY) whole in memory, held to `limits` as it arrives. */
export async function gather(source: AsyncIterable<Buffer>, limits: Limits): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of source) {
    size += chunk.length;
    if (size > limits.max) throw tooLong(limits);
    chunks.push(chunk);
  }
  checkComplete(size, limits);
  return Buffer.concat(chunks, size);
}

/**
 * A small body, gathered and then written, synced and hashed from this thread: handing it to a
 * writer thread (three messages there and three back) cost more than all of that.
 */
function smallSink(file: FileHandle, algorithm: 'sha256' | 'md5' | null): FileSink {
  const chunks: Buffer[] = [];
  return {
    async write(chunk) {
      chunks.push(chunk);
    },
    async finish() {
      const data = Buffer.concat(chunks);
      await file.writeFile(data);
      await file.datasync();
      return algorithm ? createHash(algorithm).update(data).digest('hex') : '';
    },
    async abort() {},
  };
}

/** Makes renames in `folder` durable; best effort (not every platform can fsync a folder). */
export async function syncFolder(folder: string): Promise<void> {
  try {
    const handle = await open(folder, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Durability of the rename is then up to the filesystem.
  }
}

/**
 * Streams `source` into a temp file in `tmpFolder`, counting on the way, and hashing (with `algorithm`,
 * unless null) and writing on the writer thread; stops reading as soon as it is longer than allowed. Once complete and fsynced,
 * `place` moves the temp file where it belongs. On any failure the temp file is removed and nothing
 * is placed.
 */
export async function writeStream(
  tmpFolder: string,
  source: AsyncIterable<Buffer>,
  limits: Limits,
  algorithm: 'sha256' | 'md5' | null,
  place: (tmp: string, digest: string, size: number) => Promise<void>,
): Promise<{ size: number; digest: string }> {
  const tmp = join(tmpFolder, randomSecret(12));
  writing.add(tmp);
  try {
    return await writeTemp(tmp, source, limits, algorithm, place);
  } finally {
    writing.delete(tmp);
  }
}

async function writeTemp(
  tmp: string,
  source: AsyncIterable<Buffer>,
  limits: Limits,
  algorithm: 'sha256' | 'md5' | null,
  place: (tmp: string, digest: string, size: number) => Promise<void>,
): Promise<{ size: number; digest: string }> {
  // Created before anything can fail, so that the cleanup below always finds it.
  const file = await inTempFolder(dirname(tmp), () => open(tmp, 'wx'));
  const small = limits.exact !== undefined && limits.exact <= SMALL_BODY;
  const sink = small ? smallSink(file, algorithm) : writers.open(file.fd, algorithm);
  let size = 0;
  try {
    let digest: string;
    try {
      for await (const chunk of source) {
        size += chunk.length;
        if (size > limits.max) throw tooLong(limits);
        await sink.write(chunk);
      }
      checkComplete(size, limits);
      digest = await sink.finish(); // written and synced to disk
    } catch (error) {
      await sink.abort();
      throw error;
    } finally {
      await file.close();
    }
    await place(tmp, digest, size);
    return { size, digest };
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

/** Writes a small file so that readers see the old content or the new, never a partial one. */
export async function writeAtomic(tmpFolder: string, path: string, content: string): Promise<void> {
  const tmp = join(tmpFolder, randomSecret(12));
  writing.add(tmp);
  try {
    await inTempFolder(tmpFolder, () => writeFile(tmp, content, { flag: 'wx', flush: true }));
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  } finally {
    writing.delete(tmp);
  }
  await syncFolder(dirname(path));
}

/**
 * Links the complete temp file `tmp` in place at `path`, which leaves an existing `path` as it is
 * (answers false: nothing is ever replaced); the folder is made when missing and synced once the link
 * is in it. A delete of another key in that folder may prune it between its making and the link (see
 * makeFolder): it is made again.
 */
export async function linkNew(tmp: string, path: string): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      await link(tmp, path);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      if (attempt >= PRUNE_RETRIES || !isMissing(error)) throw error;
      await makeFolder(dirname(path));
    }
  }
  await syncFolder(dirname(path));
  return true;
}

/**
 * Writes `content` as a new file at `path`, whole or not at all: synced in the temp folder, then
 * linked into place (linkNew; false when `path` exists).
 */
export async function writeNew(tmpFolder: string, path: string, content: Buffer): Promise<boolean> {
  const tmp = join(tmpFolder, randomSecret(12));
  writing.add(tmp);
  try {
    await inTempFolder(tmpFolder, () => writeFile(tmp, content, { flag: 'wx', flush: true }));
    return await linkNew(tmp, path);
  } finally {
    await unlink(tmp).catch(() => undefined);
    writing.delete(tmp);
  }
}
