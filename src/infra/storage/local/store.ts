import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, mkdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import {
  assertKey,
  type ByteRange,
  checkPartNumber,
  checkWriteSize,
  type ObjectInfo,
  type ObjectPart,
  type ObjectStore,
  type PartInfo,
  type StagedPart,
  StoreError,
} from '../object-store.ts';
import { DeleteHold } from './delete-hold.ts';
import { failing, SMALL_BODY } from './files.ts';
import { checkUploadId, LocalMultipart } from './multipart.ts';
import { LocalObjects } from './objects.ts';
import { checkPartSize } from './parts.ts';
import { type SignedUrl, signedQuery, type UploadUrl, unixSeconds, verifySignedUrl } from './signed-urls.ts';
import { type Located, type Slice, sliceStream } from './slices.ts';
import { removeStaleTemps } from './stale.ts';

/**
 * The local filesystem store. Layout under `dir`:
 *   <key>                        the object's bytes (key segments are folders)
 *   <key>.meta.json              its sidecar {size, etag, sha256}; written last, so it marks the object as present.
 *                                An object of at most 64 KiB is its sidecar alone: the line {size, etag, sha256,
 *                                inline: true}, then its bytes (one file, so one write and sync instead of two)
 *   .tmp/<random>                uploads and assemblies in progress (same filesystem, so renames are atomic)
 *   .multipart/<id>/upload.json  a multipart upload's manifest {key, contentType}
 *   .multipart/<id>/<n>/<md5>    its part n (the newest file wins while a re-upload replaces it); a part
 *                                written without its MD5 (writePart's `md5: false`) has a random id of that form
 *
 * ETags: a whole object PUT answers the quoted SHA-256 hex of its bytes (already computed for `sha256`);
 * a part answers its quoted MD5 hex and an assembled object `"md5(part md5s)-N"`, as S3 does.
 */

const CONTENT_TYPE = /^[\x21-\x7e][\x20-\x7e]{0,254}$/;

export interface LocalObjectStore extends ObjectStore {
  readonly kind: 'local';
  /** Absolute root folder of the store. */
  readonly dir: string;
  /**
   * Checks the query of a presigned URL requested with `method` on `key` (HEAD counts as GET);
   * throws StoreError Forbidden when it is tampered with, made for another method or expired.
   */
  verifyUrl(method: 'GET' | 'PUT', key: string, query: unknown): SignedUrl;
  /**
   * The object `key` (undefined when missing) and where the bytes of a range of it lie: one file, or
   * stretches of an assembled object's part files; read from its sidecar once for both.
   */
  locate(key: string): Promise<Located | undefined>;
  /** Where the bytes of `key` (or of a range of it) lie, as `read` streams them; NoSuchKey when missing. */
  slicesOf(key: string, range?: ByteRange): Promise<Slice[]>;
  /**
   * Stores the body of a verified upload URL (the whole object, or a part) and returns the quoted ETag.
   * `body` must stop being read, not be destroyed, when the store stops iterating it.
   */
  receive(url: UploadUrl, body: AsyncIterable<Buffer>): Promise<string>;
  /**
   * The files that hold the object `key`, relative to `dir` (its bytes or its segments, then its
   * sidecar); none when it does not exist. They never change while the object exists.
   */
  objectFiles(key: string): Promise<string[]>;
  /** Makes delete() wait until the returned function is called (a backup copying the objects). */
  holdDeletes(): () => void;
  /**
   * The file holding exactly the bytes of `key`, for a reader that opens files itself; undefined when
   * the object has none of its own (kept in its sidecar, or assembled from parts). NoSuchKey when missing.
   */
  ownFile(key: string): Promise<{ path: string; size: number } | undefined>;
}

export const isLocalStore = (store: ObjectStore): store is LocalObjectStore => store.kind === 'local';

function checkContentType(contentType: string): void {
  if (typeof contentType !== 'string' || !CONTENT_TYPE.test(contentType))
    throw new StoreError('InvalidArgument', 'Invalid content type');
}

class LocalStore implements LocalObjectStore {
  readonly kind = 'local' as const;
  readonly capabilities = { servesUrls: true, sha256OnUpload: true, partSizeRequired: false };
  readonly dir: string;
  readonly #publicUrl: string;
  readonly #secret: string;
  /** Where files are written before they are renamed into place. */
  readonly #tmp: string;
  readonly #objects: LocalObjects;
  readonly #multipart: LocalMultipart;
  readonly #deletes = new DeleteHold();

  constructor(options: { dir: string; publicUrl: string; secret: string }) {
    this.dir = resolve(options.dir);
    this.#publicUrl = options.publicUrl.replace(/\/+$/, '');
    this.#secret = options.secret;
    this.#tmp = join(this.dir, '.tmp');
    this.#objects = new LocalObjects({ dir: this.dir, tmp: this.#tmp });
    this.#multipart = new LocalMultipart({ dir: this.dir, tmp: this.#tmp, objects: this.#objects });
  }

  async presignUpload(
    key: string,
    options: { size: number; contentType: string; expiresAt: Date },
  ): Promise<string> {
    assertKey(key);
    checkContentType(options.contentType);
    if (!Number.isSafeInteger(options.size) || options.size < 0)
      throw new StoreError('InvalidArgument', 'Invalid object size');
    const expires = unixSeconds(options.expiresAt);
    return this.#url({ kind: 'put', key, expires, size: options.size, contentType: options.contentType });
  }

  /** A local object is final as soon as its PUT is answered, and the store never replaces it. */
  seal(key: string): Promise<ObjectInfo | undefined> {
    return this.head(key);
  }

  async presignGet(
    key: string,
    options: { expiresAt: Date; filename: string; contentType: string },
  ): Promise<string> {
    assertKey(key);
    const { contentType, filename } = options;
    checkContentType(contentType);
    return this.#url({ kind: 'get', key, expires: unixSeconds(options.expiresAt), contentType, filename });
  }

  async presignPart(
    key: string,
    uploadId: string,
    partNumber: number,
    options: { expiresAt: Date; size?: number },
  ): Promise<string> {
    assertKey(key);
    checkUploadId(uploadId);
    checkPartNumber(partNumber);
    const expires = unixSeconds(options.expiresAt);
    const { size } = options;
    if (size === undefined) return this.#url({ kind: 'part', key, expires, uploadId, partNumber });
    checkPartSize(size, await this.#multipart.totalSize(key, uploadId));
    return this.#url({ kind: 'part', key, expires, uploadId, partNumber, size });
  }

  verifyUrl(method: 'GET' | 'PUT', key: string, query: unknown): SignedUrl {
    return verifySignedUrl(this.#secret, method, key, query);
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    assertKey(key);
    const meta = await this.#objects.readMeta(key);
    return meta && { size: meta.size, etag: meta.etag, sha256: meta.sha256 };
  }

  /** An assembled object's parts are its segments; any other object is one part. */
  async headPart(key: string, partNumber: number): Promise<ObjectPart | undefined> {
    assertKey(key);
    checkPartNumber(partNumber);
    const meta = await this.#objects.readMeta(key);
    if (!meta) return undefined;
    const sizes = meta.segments ?? [meta.size];
    if (partNumber > sizes.length) {
      throw new StoreError('InvalidRange', `The object has ${sizes.length} part(s)`, {
        parts_count: sizes.length,
      });
    }
    const start = sizes.slice(0, partNumber - 1).reduce((sum, size) => sum + size, 0);
    const size = sizes[partNumber - 1]!;
    return {
      range: size > 0 ? { start, end: start + size - 1 } : undefined,
      partsCount: meta.segments?.length,
    };
  }

  async locate(key: string): Promise<Located | undefined> {
    assertKey(key);
    return this.#objects.locate(key);
  }

  async read(key: string, range?: ByteRange): Promise<Readable> {
    return sliceStream(await this.slicesOf(key, range));
  }

  async slicesOf(key: string, range?: ByteRange): Promise<Slice[]> {
    assertKey(key);
    const { start, end } = range ?? { start: 0, end: 0 };
    if (!(Number.isSafeInteger(start) && Number.isSafeInteger(end) && start >= 0 && end >= start)) {
      throw new StoreError('InvalidArgument', 'Invalid byte range');
    }
    const object = await this.locate(key);
    if (!object) throw new StoreError('NoSuchKey', 'Object not found');
    return object.slices(range);
  }

  async objectFiles(key: string): Promise<string[]> {
    assertKey(key);
    return this.#objects.objectFiles(key);
  }

  holdDeletes(): () => void {
    return this.#deletes.hold();
  }

  async ownFile(key: string): Promise<{ path: string; size: number } | undefined> {
    assertKey(key);
    return this.#objects.ownFile(key);
  }

  /** Multipart uploads live apart from the key (under their id) and end only by complete or abort. */
  async delete(key: string): Promise<void> {
    assertKey(key);
    await this.#deletes.released();
    await this.#objects.remove(key);
  }

  write(key: string, body: Readable, options: { size: number; contentType: string }): Promise<ObjectInfo> {
    return failing(async () => {
      assertKey(key);
      checkContentType(options.contentType);
      checkWriteSize(options.size);
      if (options.size > SMALL_BODY) await this.#objects.refuseExisting(key);
      // The ETag of an object written here is S3's, the MD5 of its bytes, for the S3 endpoint's clients.
      const md5 = createHash('md5');
      const hashed = async function* () {
        for await (const chunk of body as AsyncIterable<Buffer>) {
          md5.update(chunk);
          yield chunk;
        }
      };
      return this.#objects.storeObject(key, hashed(), { exact: options.size, max: options.size }, () =>
        md5.digest('hex'),
      );
    });
  }

  receive(url: UploadUrl, body: AsyncIterable<Buffer>): Promise<string> {
    return failing(() => this.#receive(url, body));
  }

  async #receive(url: UploadUrl, body: AsyncIterable<Buffer>): Promise<string> {
    if (url.kind === 'put') {
      // A small body is read before anything is written anyway, and its link refuses an existing object.
      if (url.size > SMALL_BODY) await this.#objects.refuseExisting(url.key);
      const info = await this.#objects.storeObject(url.key, body, { exact: url.size, max: url.size });
      return info.etag;
    }
    return this.#multipart.receivePart(url, body);
  }

  createMultipart(key: string, options: { contentType: string; totalSize: number }): Promise<string> {
    return failing(async () => {
      assertKey(key);
      checkContentType(options.contentType);
      return this.#multipart.create(key, options);
    });
  }

  writePart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    size: number,
    options?: { md5?: boolean },
  ): Promise<string> {
    return failing(async () => {
      assertKey(key);
      checkUploadId(uploadId);
      checkPartNumber(partNumber);
      checkPartSize(size, undefined);
      // receivePart holds the size to the upload's total, from the manifest it reads anyway.
      const url = { kind: 'part', key, expires: 0, uploadId, partNumber, size } as const;
      return this.#multipart.receivePart(url, body, options);
    });
  }

  stagePart(
    key: string,
    uploadId: string,
    body: Readable,
    size: number,
    options: { md5?: boolean } = {},
  ): StagedPart {
    assertKey(key);
    checkUploadId(uploadId);
    checkPartSize(size, undefined);
    const staged = this.#multipart.stagePart(key, uploadId, body, size, options);
    return {
      place: (partNumber) =>
        failing(async () => {
          try {
            checkPartNumber(partNumber);
          } catch (error) {
            await staged.discard();
            throw error;
          }
          return staged.place(partNumber);
        }),
      discard: () => staged.discard(),
    };
  }

  listParts(key: string, uploadId: string): Promise<PartInfo[]> {
    return this.#multipart.listParts(key, uploadId);
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: { partNumber: number; etag: string }[],
  ): Promise<ObjectInfo> {
    return failing(() => this.#multipart.complete(key, uploadId, parts));
  }

  abortMultipart(key: string, uploadId: string): Promise<void> {
    return this.#multipart.abort(key, uploadId);
  }

  /** Temp files by when they were last written; multipart uploads by start, or untouched once over. */
  async removeStale(olderThan: Date, keep: (key: string) => Promise<boolean>): Promise<number> {
    const cutoff = olderThan.getTime();
    const temps = await removeStaleTemps(this.#tmp, cutoff);
    return temps + (await this.#multipart.removeStale(cutoff, keep));
  }

  /** Ready when the root folder exists (it is created when missing) and can be written to. */
  async check(): Promise<void> {
    try {
      await mkdir(this.dir, { recursive: true });
      if (!(await stat(this.dir)).isDirectory()) throw new Error(`${this.dir} is not a folder`);
      await access(this.dir, constants.W_OK);
    } catch (error) {
      throw new StoreError('Unavailable', 'The store folder cannot be written to', undefined, {
        cause: error,
      });
    }
  }

  /** Releases the running digests; the store stays usable (complete then hashes from scratch). */
  async close(): Promise<void> {
    await this.#multipart.close();
  }

  #url(url: SignedUrl): string {
    return `${this.#publicUrl}/objects/${url.key}?${signedQuery(this.#secret, url)}`;
  }
}

export function createLocalStore(options: {
  dir: string;
  publicUrl: string;
  secret: string;
}): LocalObjectStore {
  return new LocalStore(options);
}
