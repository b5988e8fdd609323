import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import {
  type FileHandle,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  stat,
  writeFile,
} from 'node:fs/promises';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { create as contentDisposition } from 'content-disposition';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  AppError,
  badRequest,
  conflict,
  forbidden,
  notFound,
  requestTooLarge,
  validationError,
} from '../../http/errors.ts';
import { hmacHex, randomSecret, safeEqual } from '../../lib/secrets.ts';
import { fileIdentity } from './file-identity.ts';
import type { ByteRange, ObjectInfo, ObjectStore, PartInfo } from './object-store.ts';
import { type FileDigest, type HashedFile, writers } from './writer-pool.ts';

/**
 * The local filesystem store. Layout under `dir`:
 *   <key>                        the object's bytes (key segments are folders)
 *   <key>.meta.json              its sidecar {size, etag, sha256}; written last, so it marks the object as present
 *   .tmp/<random>                uploads and assemblies in progress (same filesystem, so renames are atomic)
 *   .multipart/<id>/upload.json  a multipart upload's manifest {key, contentType}
 *   .multipart/<id>/<n>/<md5>    its part n (the newest file wins while a re-upload replaces it)
 *
 * ETags: a whole object PUT answers the quoted SHA-256 hex of its bytes (already computed for `sha256`);
 * a part answers its quoted MD5 hex and an assembled object `"md5(part md5s)-N"`, as S3 does.
 */

const KEY = /^[A-Za-z0-9_-]+(?:\/[A-Za-z0-9_-]+)*$/;
const UPLOAD_ID = /^[A-Za-z0-9_-]{16,64}$/;
const MD5_HEX = /^[0-9a-f]{32}$/;
const CONTENT_TYPE = /^[\x21-\x7e][\x20-\x7e]{0,254}$/;
const MAX_KEY_LENGTH = 1024;
const MAX_PART_NUMBER = 10_000;
export const MAX_PART_SIZE = 5 * 1024 ** 3;
const BUFFER_SIZE = 1024 * 1024;
const META = '.meta.json';
const MANIFEST = 'upload.json';
/** How many bytes the parts of a multipart upload may hold per byte it declared. */
const STORED_PER_DECLARED_BYTE = 2;
/** Beside an assembled multipart object: its part files, in order. */
const PARTS = '.parts';
/**
 * Multipart uploads a store keeps state for in memory at once (a running digest, the part sizes);
 * past that, the least recently used lose it (complete then hashes from scratch, sizes are read again).
 */
const MAX_TRACKED_UPLOADS = 256;

/** What a presigned URL allows, as signed: a download, a whole-object upload or one part of a multipart upload. */
export type SignedUrl =
  | { kind: 'get'; key: string; expires: number; contentType: string; filename: string }
  | { kind: 'put'; key: string; expires: number; size: number; contentType: string }
  | { kind: 'part'; key: string; expires: number; uploadId: string; partNumber: number };

export type UploadUrl = Extract<SignedUrl, { kind: 'put' | 'part' }>;

/** Bytes `start`..`end` (inclusive) of the file at `path`. */
export interface Slice {
  path: string;
  start: number;
  end: number;
}

export interface LocalObjectStore extends ObjectStore {
  readonly kind: 'local';
  /** Absolute root folder of the store. */
  readonly dir: string;
  /**
   * Checks the query of a presigned URL requested with `method` on `key` (HEAD counts as GET);
   * throws 403 FORBIDDEN when it is tampered with, made for another method or expired.
   */
  verifyUrl(method: 'GET' | 'PUT', key: string, query: unknown): SignedUrl;
  /** Where the bytes of `range` lie: one file, or stretches of an assembled object's part files. */
  slices(key: string, range?: ByteRange): Promise<Slice[]>;
  /**
   * Stores the body of a verified upload URL (the whole object, or a part) and returns the quoted ETag.
   * `body` must stop being read, not be destroyed, when the store stops iterating it.
   */
  receive(url: UploadUrl, body: AsyncIterable<Buffer>): Promise<string>;
}

interface Limits {
  /** The exact size the body must have, when declared. */
  exact?: number;
  max: number;
}

function checkKey(key: string): void {
  if (typeof key !== 'string' || key.length > MAX_KEY_LENGTH || !KEY.test(key)) {
    throw badRequest('Invalid object key', { key: String(key).slice(0, 200) });
  }
}

function checkPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
    throw badRequest(`Part numbers run from 1 to ${MAX_PART_NUMBER}`, {
      field: 'part',
      part_number: partNumber,
    });
  }
}

function checkContentType(contentType: string): void {
  if (typeof contentType !== 'string' || !CONTENT_TYPE.test(contentType))
    throw badRequest('Invalid content type');
}

function unixSeconds(date: Date): number {
  const seconds = Math.ceil(date.getTime() / 1000);
  if (!Number.isSafeInteger(seconds) || seconds < 0) throw badRequest('Invalid expiry');
  return seconds;
}

/** The signed fields of a URL, in a canonical order; JSON keeps them unambiguous whatever they contain. */
function canonical(url: SignedUrl): string {
  switch (url.kind) {
    case 'get':
      return JSON.stringify(['GET', url.kind, url.key, url.expires, url.contentType, url.filename]);
    case 'put':
      return JSON.stringify(['PUT', url.kind, url.key, url.expires, url.size, url.contentType]);
    case 'part':
      return JSON.stringify(['PUT', url.kind, url.key, url.expires, url.uploadId, url.partNumber]);
  }
}

/** The query parameters that carry a URL's signed fields (`sig` is added alongside). */
function queryOf(url: SignedUrl): Record<string, string> {
  const exp = String(url.expires);
  switch (url.kind) {
    case 'get':
      return { exp, type: url.contentType, name: url.filename };
    case 'put':
      return { exp, size: String(url.size), type: url.contentType };
    case 'part':
      return { upload: url.uploadId, part: String(url.partNumber), exp };
  }
}

/** Reads the signed fields back from a request's query; undefined when any is missing or malformed. */
function fromQuery(method: 'GET' | 'PUT', key: string, query: unknown): SignedUrl | undefined {
  const params = (query ?? {}) as Record<string, unknown>;
  const text = (name: string) => (typeof params[name] === 'string' ? params[name] : undefined);
  const integer = (name: string) => {
    const value = text(name);
    return value !== undefined && /^\d{1,15}$/.test(value) ? Number(value) : undefined;
  };
  const expires = integer('exp');
  if (expires === undefined) return undefined;
  if (method === 'GET') {
    const contentType = text('type');
    const filename = text('name');
    return contentType === undefined || filename === undefined
      ? undefined
      : { kind: 'get', key, expires, contentType, filename };
  }
  const uploadId = text('upload');
  if (uploadId !== undefined) {
    const partNumber = integer('part');
    return partNumber === undefined ? undefined : { kind: 'part', key, expires, uploadId, partNumber };
  }
  const size = integer('size');
  const contentType = text('type');
  return size === undefined || contentType === undefined
    ? undefined
    : { kind: 'put', key, expires, size, contentType };
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** The newest stored version of part `partNumber` in an upload's `folder` (a re-upload replaces it). */
async function newestPart(
  folder: string,
  partNumber: number,
): Promise<{ md5: string; size: number } | undefined> {
  const partFolder = join(folder, String(partNumber));
  let newest: { md5: string; size: number; mtimeMs: number } | undefined;
  for (const md5 of await readdir(partFolder).catch(() => [])) {
    const info = MD5_HEX.test(md5) ? await stat(join(partFolder, md5)).catch(() => undefined) : undefined;
    if (info && (!newest || info.mtimeMs > newest.mtimeMs))
      newest = { md5, size: info.size, mtimeMs: info.mtimeMs };
  }
  return newest && { md5: newest.md5, size: newest.size };
}

/** The newest version of every part in an upload's `folder`, by ascending part number. */
async function storedParts(folder: string): Promise<{ partNumber: number; md5: string; size: number }[]> {
  const numbers = (await readdir(folder)).filter((name) => /^\d+$/.test(name)).map(Number);
  const parts = await Promise.all(
    numbers.map(async (partNumber) => {
      const part = await newestPart(folder, partNumber);
      return part && { partNumber, ...part };
    }),
  );
  return parts.filter((part) => part !== undefined).sort((a, b) => a.partNumber - b.partNumber);
}

/**
 * The bytes stored for a multipart upload stay bounded by what it declared (an upload token's size
 * limit holds for the disk, not only at complete): with the newest version of every other part, at
 * most twice the total, which leaves room for parts a client cut again but will not complete.
 */
function checkStoredBytes(sizes: Map<number, number>, partNumber: number, size: number, total: number): void {
  let others = 0;
  for (const [n, bytes] of sizes) if (n !== partNumber) others += bytes;
  const limit = STORED_PER_DECLARED_BYTE * total;
  if (others + size > limit) {
    throw new AppError(
      413,
      'REQUEST_TOO_LARGE',
      `With this part the upload would store ${others + size} bytes, more than twice the ${total} it declared`,
      { max_bytes: limit, stored_bytes: others },
    );
  }
}

/** Makes renames in `folder` durable; best effort (not every platform can fsync a folder). */
async function syncFolder(folder: string): Promise<void> {
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

/** A part hashed by a running digest: its file, and the identity of the file that was read. */
interface HashedPart extends HashedFile {
  path: string;
}

/**
 * The SHA-256 of a multipart upload's parts 1, 2, 3, … computed while the upload is under way: each
 * part is hashed as soon as it and every part before it are stored (read back while the page cache
 * still holds it), so that complete only hashes what came last. It is a shortcut, never trusted
 * blindly: complete uses it only when the parts it hashed are the first parts being completed and
 * are still the very files that were read (same path, inode, size and time); a re-uploaded, missing
 * or out-of-sequence part makes complete hash from scratch.
 */
class RunningDigest {
  readonly hashed: HashedPart[] = [];
  readonly #digest: FileDigest = writers.digest('sha256');
  #work: Promise<void> = Promise.resolve();
  #stopped = false;
  #broken = false;

  /** The upload's folder: gone once the upload is finished or aborted. */
  readonly folder: string;

  constructor(folder: string) {
    this.folder = folder;
  }

  /** Hashes the next parts in sequence, for as long as `nextPart` finds their files. */
  advance(nextPart: (partNumber: number) => Promise<string | undefined>): void {
    this.#work = this.#work.then(async () => {
      try {
        while (!this.#stopped && !this.#broken) {
          const path = await nextPart(this.hashed.length + 1);
          if (!path || this.#stopped) return;
          this.hashed.push({ path, ...(await this.#digest.add(path)) });
        }
      } catch {
        this.#broken = true; // e.g. the part was replaced while being read: complete starts over
      }
    });
  }

  /** Stops advancing; resolves to the digest of the parts hashed so far, or undefined when it broke. */
  async stop(): Promise<FileDigest | undefined> {
    this.#stopped = true;
    await this.#work;
    if (!this.#broken) return this.#digest;
    await this.#digest.abort();
    return undefined;
  }
}

class LocalStore implements LocalObjectStore {
  readonly kind = 'local' as const;
  readonly dir: string;
  readonly #publicUrl: string;
  readonly #secret: string;
  /** Running SHA-256 digests of this process's multipart uploads, by upload id (oldest first). */
  readonly #running = new Map<string, RunningDigest>();
  /** Per multipart upload: the size of each part (see #partSizes), and the parts being placed. */
  readonly #sizes = new Map<string, Map<number, number>>();
  readonly #queues = new Map<string, Promise<void>>();

  constructor(options: { dir: string; publicUrl: string; secret: string }) {
    this.dir = resolve(options.dir);
    this.#publicUrl = options.publicUrl.replace(/\/+$/, '');
    this.#secret = options.secret;
  }

  async presignPut(
    key: string,
    options: { size: number; contentType: string; expiresAt: Date },
  ): Promise<string> {
    checkKey(key);
    checkContentType(options.contentType);
    if (!Number.isSafeInteger(options.size) || options.size < 0) throw badRequest('Invalid object size');
    const expires = unixSeconds(options.expiresAt);
    return this.#url({ kind: 'put', key, expires, size: options.size, contentType: options.contentType });
  }

  async presignGet(
    key: string,
    options: { expiresAt: Date; filename: string; contentType: string },
  ): Promise<string> {
    checkKey(key);
    checkContentType(options.contentType);
    const expires = unixSeconds(options.expiresAt);
    return this.#url({
      kind: 'get',
      key,
      expires,
      contentType: options.contentType,
      filename: options.filename,
    });
  }

  async presignPart(key: string, uploadId: string, partNumber: number, expiresAt: Date): Promise<string> {
    checkKey(key);
    if (!UPLOAD_ID.test(uploadId)) throw badRequest('Invalid upload id');
    checkPartNumber(partNumber);
    return this.#url({ kind: 'part', key, expires: unixSeconds(expiresAt), uploadId, partNumber });
  }

  verifyUrl(method: 'GET' | 'PUT', key: string, query: unknown): SignedUrl {
    const url = fromQuery(method, key, query);
    const sig = (query as Record<string, unknown> | undefined)?.sig;
    if (!url || typeof sig !== 'string' || !safeEqual(hmacHex(this.#secret, canonical(url)), sig)) {
      throw forbidden('The URL signature is invalid');
    }
    if (Date.now() >= url.expires * 1000) throw forbidden('The URL has expired');
    return url;
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    checkKey(key);
    try {
      const { size, etag, sha256 } = JSON.parse(await readFile(this.#path(key) + META, 'utf8')) as ObjectInfo;
      return { size, etag, sha256 };
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  /**
   * Where the bytes `range` (default: all) of the object lie: one file, or for an assembled
   * multipart object the stretches of its part files. 404 when the object is missing.
   */
  async slices(key: string, range?: ByteRange): Promise<Slice[]> {
    checkKey(key);
    const path = this.#path(key);
    let meta: ObjectInfo & { segments?: number[] };
    try {
      meta = JSON.parse(await readFile(path + META, 'utf8'));
    } catch (error) {
      if (isMissing(error)) throw notFound('Object');
      throw error;
    }
    const pieces = meta.segments
      ? meta.segments.map((size, index) => ({ path: join(path + PARTS, String(index)), size }))
      : [{ path, size: meta.size }];
    const start = range?.start ?? 0;
    const end = range?.end ?? meta.size - 1;
    const slices: Slice[] = [];
    let offset = 0;
    for (const piece of pieces) {
      const from = Math.max(start, offset);
      const to = Math.min(end, offset + piece.size - 1);
      if (from <= to) slices.push({ path: piece.path, start: from - offset, end: to - offset });
      offset += piece.size;
    }
    return slices;
  }

  async read(key: string, range?: ByteRange): Promise<Readable> {
    checkKey(key);
    if (
      range &&
      !(Number.isSafeInteger(range.start) && Number.isSafeInteger(range.end) && range.start >= 0)
    ) {
      throw badRequest('Invalid byte range');
    }
    if (range && range.end < range.start) throw badRequest('Invalid byte range');
    const slices = await this.slices(key, range);
    return Readable.from(
      (async function* () {
        for (const slice of slices)
          yield* createReadStream(slice.path, { ...slice, highWaterMark: BUFFER_SIZE });
      })(),
    );
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    const path = this.#path(key);
    await rm(path + META, { force: true });
    await rm(path, { force: true });
    await rm(path + PARTS, { recursive: true, force: true });
    // Prune the folders the key leaves empty; a concurrent upload into one of them retries its rename.
    const segments = key.split('/');
    for (let depth = segments.length - 1; depth > 0; depth--) {
      try {
        await rmdir(join(this.dir, ...segments.slice(0, depth)));
      } catch {
        break;
      }
    }
  }

  async receive(url: UploadUrl, body: AsyncIterable<Buffer>): Promise<string> {
    if (url.kind === 'put') {
      await this.#refuseExisting(url.key);
      const info = await this.#storeObject(url.key, body, { exact: url.size, max: url.size });
      return info.etag;
    }
    const { folder, totalSize } = await this.#upload(url.key, url.uploadId);
    const partFolder = join(folder, String(url.partNumber));
    const max = Math.min(totalSize ?? MAX_PART_SIZE, MAX_PART_SIZE);
    const { digest } = await this.#write(body, { max }, 'md5', async (tmp, md5, size) => {
      // Checked and placed one part at a time per upload, so that parallel parts cannot all pass.
      await this.#serially(url.uploadId, async () => {
        const sizes = await this.#partSizes(url.uploadId, folder);
        if (totalSize !== undefined) checkStoredBytes(sizes, url.partNumber, size, totalSize);
        try {
          await mkdir(partFolder); // not recursive: a finished or aborted upload must stay gone
        } catch (error) {
          if (isMissing(error)) throw notFound('Upload');
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        }
        try {
          await rename(tmp, join(partFolder, md5));
        } catch (error) {
          if (isMissing(error)) throw notFound('Upload'); // aborted or completed meanwhile
          throw error;
        }
        sizes.set(url.partNumber, size);
      });
      await syncFolder(partFolder);
    });
    // A re-upload replaces the part: older versions go (a concurrent newer one stays).
    const newest = await stat(join(partFolder, digest)).catch(() => undefined);
    for (const name of await readdir(partFolder).catch(() => [])) {
      if (name === digest || !newest) continue;
      const other = await stat(join(partFolder, name)).catch(() => undefined);
      if (other && other.mtimeMs <= newest.mtimeMs) await rm(join(partFolder, name), { force: true });
    }
    this.#advance(url.uploadId, dirname(partFolder));
    return `"${digest}"`;
  }

  async createMultipart(key: string, options: { contentType: string; totalSize: number }): Promise<string> {
    checkKey(key);
    checkContentType(options.contentType);
    if (!Number.isSafeInteger(options.totalSize) || options.totalSize < 0)
      throw badRequest('Invalid total size');
    const uploadId = randomSecret(18);
    const folder = this.#uploadPath(uploadId);
    await mkdir(folder, { recursive: true });
    await this.#writeAtomic(
      join(folder, MANIFEST),
      JSON.stringify({ key, contentType: options.contentType, totalSize: options.totalSize }),
    );
    return uploadId;
  }

  async listParts(key: string, uploadId: string): Promise<PartInfo[]> {
    const { folder } = await this.#upload(key, uploadId);
    return (await storedParts(folder)).map(({ partNumber, md5, size }) => ({
      partNumber,
      etag: `"${md5}"`,
      size,
    }));
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: { partNumber: number; etag: string }[],
  ): Promise<ObjectInfo> {
    const { folder } = await this.#upload(key, uploadId);
    if (parts.length === 0) throw validationError('A multipart upload needs at least one part');
    const files: string[] = [];
    const md5s: Buffer[] = [];
    for (const { partNumber, etag } of parts) {
      const md5 = String(etag).replace(/^"|"$/g, '').toLowerCase();
      const versions = Number.isInteger(partNumber)
        ? await readdir(join(folder, String(partNumber))).catch(() => [])
        : [];
      if (!MD5_HEX.test(md5) || !versions.includes(md5)) {
        const reason = versions.length > 0 ? 'does not match the uploaded part' : 'was not uploaded';
        throw validationError(`Part ${partNumber} ${reason}`, { part_number: partNumber, etag });
      }
      files.push(join(folder, String(partNumber), md5));
      md5s.push(Buffer.from(md5, 'hex'));
    }
    await this.#refuseExisting(key);
    const etag = `"${createHash('md5').update(Buffer.concat(md5s)).digest('hex')}-${parts.length}"`;
    // The SHA-256 of the parts hashed while they arrived, when they are the first parts completed.
    let running = await this.#stopRunning(uploadId);
    if (running && !running.parts.every((part, index) => part.path === files[index])) {
      await running.digest.abort();
      running = undefined;
    }
    // The parts become the object's segments by renaming (which keeps their identity): nothing is copied.
    const path = this.#path(key);
    const moved: [part: string, segment: string][] = [];
    let digest = running?.digest;
    let info: ObjectInfo;
    try {
      await mkdir(path + PARTS, { recursive: true });
      const sizes: number[] = [];
      for (const [index, file] of files.entries()) {
        const segment = join(path + PARTS, String(index));
        await rename(file, segment);
        moved.push([file, segment]);
        const stats = await stat(segment);
        sizes.push(stats.size);
        if (
          running &&
          index < running.parts.length &&
          running.parts[index]!.identity !== fileIdentity(stats)
        ) {
          await running.digest.abort(); // replaced after it was hashed, by bytes of the same MD5
          running = undefined;
        }
      }
      digest = running?.digest ?? writers.digest('sha256');
      for (const [, segment] of moved.slice(running?.parts.length ?? 0)) await digest.add(segment);
      await syncFolder(path + PARTS);
      info = {
        size: sizes.reduce((sum, size) => sum + size, 0),
        etag,
        sha256: await digest.finish(),
      };
      await this.#writeAtomic(path + META, JSON.stringify({ ...info, segments: sizes }));
    } catch (error) {
      // Until the sidecar is written the object does not exist: put the parts back, so that the upload
      // can be completed again.
      await (digest ?? running?.digest)?.abort();
      for (const [part, segment] of moved) await rename(segment, part).catch(() => undefined);
      await rm(path + PARTS, { recursive: true, force: true });
      throw error;
    }
    // The object exists. The upload ends with its manifest (no part is accepted after that); what is
    // left of it (stray parts) is only tidied up.
    this.#sizes.delete(uploadId);
    await rm(join(folder, MANIFEST), { force: true }).catch(() => undefined);
    await rm(folder, { recursive: true, force: true }).catch(() => undefined);
    return info;
  }

  async abortMultipart(key: string, uploadId: string): Promise<void> {
    checkKey(key);
    if (!UPLOAD_ID.test(uploadId)) return;
    try {
      await this.#upload(key, uploadId);
    } catch (error) {
      if (error instanceof AppError && error.status === 404) return;
      throw error;
    }
    await this.#forget(uploadId);
    await rm(this.#uploadPath(uploadId), { recursive: true, force: true });
  }

  /** Drops what this process keeps in memory for an upload that is over. */
  async #forget(uploadId: string): Promise<void> {
    await (await this.#stopRunning(uploadId))?.digest.abort();
    this.#sizes.delete(uploadId);
  }

  /** Hashes the upload's next parts in sequence in the background (see RunningDigest). */
  #advance(uploadId: string, folder: string): void {
    let running = this.#running.get(uploadId);
    if (!running) {
      running = new RunningDigest(folder);
      this.#running.set(uploadId, running);
      void this.#prune();
    }
    running.advance(async (partNumber) => {
      const part = await newestPart(folder, partNumber);
      return part && join(folder, String(partNumber), part.md5);
    });
  }

  /**
   * Keeps the tracked uploads few: the oldest running digest is forgotten when there are too many, or
   * when its upload is gone (finished or aborted by another process); a live one goes to the back of
   * the line. One look per new digest goes round them all.
   */
  async #prune(): Promise<void> {
    const [oldest, running] = this.#running.entries().next().value!;
    const gone = await stat(running.folder).then(
      () => false,
      (error) => isMissing(error),
    );
    if (gone || this.#running.size > MAX_TRACKED_UPLOADS) {
      await this.#forget(oldest);
    } else if (this.#running.get(oldest) === running) {
      this.#running.delete(oldest);
      this.#running.set(oldest, running);
    }
  }

  /** Stops the upload's running digest: the parts it hashed and their digest, when it did not break. */
  async #stopRunning(uploadId: string): Promise<{ parts: HashedPart[]; digest: FileDigest } | undefined> {
    const running = this.#running.get(uploadId);
    if (!running) return undefined;
    this.#running.delete(uploadId);
    const digest = await running.stop();
    return digest && { parts: running.hashed, digest };
  }

  #url(url: SignedUrl): string {
    const query = new URLSearchParams({ ...queryOf(url), sig: hmacHex(this.#secret, canonical(url)) });
    return `${this.#publicUrl}/objects/${url.key}?${query}`;
  }

  #path(key: string): string {
    return join(this.dir, ...key.split('/'));
  }

  #uploadPath(uploadId: string): string {
    return join(this.dir, '.multipart', uploadId);
  }

  /**
   * The folder of the live upload `uploadId` of `key` and the total it declared (unknown for uploads
   * started before totals were recorded); 404 NOT_FOUND when unknown, finished or aborted.
   */
  async #upload(key: string, uploadId: string): Promise<{ folder: string; totalSize?: number }> {
    checkKey(key);
    const folder = this.#uploadPath(uploadId);
    if (UPLOAD_ID.test(uploadId)) {
      try {
        const manifest = JSON.parse(await readFile(join(folder, MANIFEST), 'utf8')) as {
          key: string;
          totalSize?: number;
        };
        if (manifest.key === key) return { folder, totalSize: manifest.totalSize };
      } catch (error) {
        if (!isMissing(error)) throw error;
      }
    }
    throw notFound('Upload');
  }

  /** Runs `work` after the earlier work queued for `uploadId` in this process. */
  #serially<T>(uploadId: string, work: () => Promise<T>): Promise<T> {
    const run = (this.#queues.get(uploadId) ?? Promise.resolve()).then(work);
    const done = run.then(
      () => undefined,
      () => undefined,
    );
    this.#queues.set(uploadId, done);
    void done.then(() => {
      if (this.#queues.get(uploadId) === done) this.#queues.delete(uploadId);
    });
    return run;
  }

  /**
   * The sizes of an upload's parts. The part numbers come from its folder every time (so that parts
   * placed by another process count); the size of a part number already known is kept from when it
   * was read or placed here, so that only new part numbers cost a look at their files.
   */
  async #partSizes(uploadId: string, folder: string): Promise<Map<number, number>> {
    const known = this.#sizes.get(uploadId) ?? new Map<number, number>();
    // The most recently used last: past the cap, the least recently used goes.
    this.#sizes.delete(uploadId);
    this.#sizes.set(uploadId, known);
    if (this.#sizes.size > MAX_TRACKED_UPLOADS) this.#sizes.delete(this.#sizes.keys().next().value!);
    // A missing folder (the upload just ended) has no parts; placing the part then answers 404.
    const names = await readdir(folder).catch((error) => (isMissing(error) ? [] : Promise.reject(error)));
    const numbers = new Set(names.filter((name) => /^\d+$/.test(name)).map(Number));
    for (const partNumber of known.keys()) if (!numbers.has(partNumber)) known.delete(partNumber);
    await Promise.all(
      [...numbers]
        .filter((partNumber) => !known.has(partNumber))
        .map(async (partNumber) => {
          const part = await newestPart(folder, partNumber);
          if (part) known.set(partNumber, part.size);
        }),
    );
    return known;
  }

  /** Keys name one immutable object: an uploaded one is never replaced through a still-valid URL. */
  async #refuseExisting(key: string): Promise<void> {
    if (await this.head(key)) throw conflict('The object has already been uploaded', { key });
  }

  /** Writes `source` as the object `key`, then its sidecar (which makes it visible). */
  async #storeObject(key: string, source: AsyncIterable<Buffer>, limits: Limits): Promise<ObjectInfo> {
    const path = this.#path(key);
    const { size, digest } = await this.#write(source, limits, 'sha256', async (tmp) => {
      // The folder may be pruned by a concurrent delete between its creation and the rename: retry once.
      for (let attempt = 1; ; attempt++) {
        await this.#refuseExisting(key);
        await mkdir(dirname(path), { recursive: true });
        try {
          await rename(tmp, path);
          break;
        } catch (error) {
          if (attempt > 1 || !isMissing(error)) throw error;
        }
      }
      await syncFolder(dirname(path));
    });
    const info: ObjectInfo = { size, etag: `"${digest}"`, sha256: digest };
    await this.#writeAtomic(path + META, JSON.stringify(info));
    return info;
  }

  /**
   * Streams `source` into a temp file on the store's filesystem, counting on the way, and hashing and
   * writing on the writer thread; stops reading as soon as it is longer than allowed. Once complete and
   * fsynced, `place` moves the temp file where it belongs. On any failure the temp file is removed and
   * nothing is placed.
   */
  async #write(
    source: AsyncIterable<Buffer>,
    limits: Limits,
    algorithm: 'sha256' | 'md5',
    place: (tmp: string, digest: string, size: number) => Promise<void>,
  ): Promise<{ size: number; digest: string }> {
    const tmp = join(this.dir, '.tmp', randomSecret(12));
    await mkdir(dirname(tmp), { recursive: true });
    // Created before anything can fail, so that the cleanup below always finds it.
    const file = await open(tmp, 'wx');
    const sink = writers.open(file.fd, algorithm);
    let size = 0;
    try {
      let digest: string;
      try {
        for await (const chunk of source) {
          size += chunk.length;
          if (size > limits.max) {
            throw limits.exact === undefined
              ? requestTooLarge(limits.max)
              : badRequest(`The body is longer than the declared ${limits.exact} bytes`);
          }
          await sink.write(chunk);
        }
        if (limits.exact !== undefined && size !== limits.exact) {
          throw badRequest(`The body has ${size} bytes but ${limits.exact} were declared`);
        }
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
  async #writeAtomic(path: string, content: string): Promise<void> {
    const tmp = join(this.dir, '.tmp', randomSecret(12));
    await mkdir(dirname(tmp), { recursive: true });
    try {
      await writeFile(tmp, content, { flag: 'wx', flush: true });
      await rename(tmp, path);
    } catch (error) {
      await rm(tmp, { force: true });
      throw error;
    }
    await syncFolder(dirname(path));
  }
}

export function createLocalStore(options: {
  dir: string;
  publicUrl: string;
  secret: string;
}): LocalObjectStore {
  return new LocalStore(options);
}

/**
 * The single range a Range header asks for; undefined serves the whole object (no header, a malformed
 * one, or several ranges). A range starting past the end is 416 RANGE_NOT_SATISFIABLE.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | undefined {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const first = match[1] === '' ? undefined : Number(match[1]);
  const last = match[2] === '' ? undefined : Number(match[2]);
  let range: ByteRange | undefined;
  if (first === undefined) {
    if (last! > 0 && size > 0) range = { start: Math.max(0, size - last!), end: size - 1 };
  } else {
    if (last !== undefined && last < first) return undefined;
    if (first < size) range = { start: first, end: Math.min(last ?? size - 1, size - 1) };
  }
  if (!range) {
    throw new AppError(
      416,
      'RANGE_NOT_SATISFIABLE',
      `The range is outside the object's ${size} bytes`,
      undefined,
      {
        'content-range': `bytes */${size}`,
      },
    );
  }
  return range;
}

function keyOf(request: FastifyRequest): string {
  const key = (request.params as { '*': string })['*'];
  checkKey(key);
  return key;
}

/**
 * Whether a PUT's Content-Type is the signed one (case and spaces aside). When the signed type has no
 * parameters, the header's are ignored: browsers add `;charset=UTF-8` to text bodies.
 */
function sameType(header: string | undefined, signed: string): boolean {
  const normal = (value: string) =>
    value
      .replace(/\s*;\s*/g, ';')
      .trim()
      .toLowerCase();
  if (header === undefined) return false;
  const sent = normal(header);
  const expected = normal(signed);
  return sent === expected || (!expected.includes(';') && sent.split(';')[0] === expected);
}

async function download(store: LocalObjectStore, request: FastifyRequest, reply: FastifyReply) {
  const key = keyOf(request);
  const url = store.verifyUrl('GET', key, request.query);
  if (url.kind !== 'get') throw forbidden('The URL signature is invalid');
  const info = await store.head(key);
  if (!info) throw notFound('Object');
  const range = parseRange(request.headers.range, info.size);
  reply.headers({
    'content-type': url.contentType,
    'content-length': String(range ? range.end - range.start + 1 : info.size),
    'content-disposition': contentDisposition(url.filename),
    'x-content-type-options': 'nosniff',
    'content-security-policy': 'sandbox',
    'cache-control': `private, max-age=${Math.max(0, Math.floor(url.expires - Date.now() / 1000))}`,
    'accept-ranges': 'bytes',
    etag: info.etag,
  });
  if (range) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${info.size}`);
  if (request.method === 'HEAD' || info.size === 0) return reply.send();
  const slices = await store.slices(key, range);
  reply.hijack();
  const response = reply.raw;
  response.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders);
  try {
    for (const slice of slices) {
      const handle = await open(slice.path, 'r');
      try {
        await streamFile(handle, response, slice.start, slice.end);
      } finally {
        await handle.close();
      }
    }
    response.end();
  } catch (error) {
    request.log.warn({ err: error }, 'download interrupted');
    response.destroy();
  }
}

/**
 * Writes bytes `start`..`end` of the file to the response through two buffers used in turn: one
 * is read into while the other is being sent. A large download allocates nothing per chunk, so
 * it leaves no garbage behind (what slows a busy process down is the collector, not the disk).
 */
async function streamFile(
  handle: FileHandle,
  response: ServerResponse,
  start: number,
  end: number,
): Promise<void> {
  const buffers = [Buffer.allocUnsafeSlow(BUFFER_SIZE), Buffer.allocUnsafeSlow(BUFFER_SIZE)];
  const sending: (Promise<void> | undefined)[] = [undefined, undefined];
  let position = start;
  for (let turn = 0; position <= end; turn ^= 1) {
    await sending[turn]; // this buffer's previous chunk has reached the socket
    if (response.destroyed) throw new Error('the client went away');
    const buffer = buffers[turn]!;
    const { bytesRead } = await handle.read(buffer, 0, Math.min(BUFFER_SIZE, end - position + 1), position);
    if (bytesRead === 0) throw new Error('the object is shorter than its recorded size');
    position += bytesRead;
    sending[turn] = new Promise((resolve, reject) => {
      response.write(buffer.subarray(0, bytesRead), (error) => (error ? reject(error) : resolve()));
    });
  }
  await Promise.all(sending);
}

async function upload(store: LocalObjectStore, request: FastifyRequest, reply: FastifyReply) {
  try {
    const key = keyOf(request);
    const url = store.verifyUrl('PUT', key, request.query);
    if (url.kind === 'get') throw forbidden('The URL signature is invalid');
    const header = request.headers['content-length'];
    const declared = header === undefined ? undefined : Number(header);
    if (url.kind === 'put') {
      if (!sameType(request.headers['content-type'], url.contentType)) {
        throw forbidden('The Content-Type header does not match the signed content type');
      }
      if (declared !== undefined && declared !== url.size) {
        throw badRequest(`Content-Length is ${declared} but the URL is signed for ${url.size} bytes`);
      }
    } else if (declared !== undefined && declared > MAX_PART_SIZE) {
      throw requestTooLarge(MAX_PART_SIZE);
    }
    // Iterating must not destroy the request when the store stops early, so the error can still be answered.
    const body = { [Symbol.asyncIterator]: () => request.raw.iterator({ destroyOnReturn: false }) };
    const etag = await store.receive(url, body);
    return reply.header('etag', etag).send();
  } catch (error) {
    // Stop reading an unread or rejected body: the connection closes once the answer is sent.
    if (!request.raw.complete) reply.header('connection', 'close');
    if (request.raw.errored && !(error instanceof AppError)) throw badRequest('The upload was interrupted');
    throw error;
  }
}

/**
 * The presigned URL endpoints, at the absolute paths /objects/<key> (register without a prefix).
 * The plugin is encapsulated: its catch-all content type parser hands PUT bodies over unread, so no
 * body limit or parser applies to them.
 */
export function localObjectRoutes(store: LocalObjectStore): FastifyPluginAsync {
  return async (instance) => {
    instance.removeAllContentTypeParsers();
    instance.addContentTypeParser('*', (_request, _payload, done) => done(null));
    const options = { schema: { hide: true }, config: { access: 'public' as const } };
    instance.route({
      ...options,
      method: ['GET', 'HEAD'],
      url: '/objects/*',
      handler: (request, reply) => download(store, request, reply),
    });
    instance.route({
      ...options,
      method: 'PUT',
      url: '/objects/*',
      handler: (request, reply) => upload(store, request, reply),
    });
  };
}
