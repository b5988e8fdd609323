import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { randomSecret } from '../../../lib/secrets.ts';
import { fileIdentity } from '../file-identity.ts';
import {
  assertKey,
  isStoreError,
  MAX_PART_SIZE,
  type ObjectInfo,
  type PartInfo,
  type StagedPart,
  StoreError,
} from '../object-store.ts';
import { writers } from '../writer-pool.ts';
import { entries, isMissing, makeFolder, syncFolder, writeAtomic, writeStream } from './files.ts';
import {
  checkPartSize,
  dropOlderVersions,
  MAX_TRACKED_UPLOADS,
  PartLedger,
  partFiles,
  storedParts,
} from './parts.ts';
import { RunningDigests } from './running-digest.ts';
import type { SignedUrl } from './signed-urls.ts';
import { isStaleUpload } from './stale.ts';

/**
 * The multipart uploads of the local store, each in its folder `.multipart/<id>/` (see the layout in
 * store.ts): started, given parts, listed, then completed into an object of the store, or aborted.
 */

const UPLOAD_ID = /^[A-Za-z0-9_-]{16,64}$/;
const MANIFEST = 'upload.json';

/** What an upload's manifest holds. */
interface Manifest {
  key: string;
  /** Unknown for uploads started before totals were recorded. */
  totalSize?: number;
}

export function checkUploadId(uploadId: string): void {
  if (!UPLOAD_ID.test(uploadId)) throw new StoreError('InvalidArgument', 'Invalid upload id');
}

/** What completing an upload needs of the store's objects. */
export interface ObjectSide {
  /** The folder that holds an assembled object's segments: its part files, in order. */
  segmentsFolder(key: string): string;
  /** Throws AlreadyExists when `key` names an object. */
  refuseExisting(key: string): Promise<void>;
  /** Writes the object's sidecar, which makes it exist. */
  writeSidecar(key: string, meta: ObjectInfo & { segments: number[] }): Promise<void>;
}

export class LocalMultipart {
  /** The folder of the uploads, one folder each. */
  readonly #root: string;
  readonly #tmp: string;
  readonly #objects: ObjectSide;
  readonly #digests = new RunningDigests((uploadId) => this.#forget(uploadId));
  readonly #parts = new PartLedger();
  /**
   * The manifests of uploads this process wrote parts of lately (a manifest never changes), so that a
   * part's write reads none: the part's placing still finds an upload that ended meanwhile gone.
   */
  readonly #manifests = new LRUCache<string, Manifest>({ max: MAX_TRACKED_UPLOADS });

  constructor(options: { dir: string; tmp: string; objects: ObjectSide }) {
    this.#root = join(options.dir, '.multipart');
    this.#tmp = options.tmp;
    this.#objects = options.objects;
  }

  /** Starts an upload of `key` (already checked, as its content type) and answers its id. */
  async create(key: string, options: { contentType: string; totalSize: number }): Promise<string> {
    if (!Number.isSafeInteger(options.totalSize) || options.totalSize < 0)
      throw new StoreError('InvalidArgument', 'Invalid total size');
    const uploadId = randomSecret(18);
    const folder = this.#uploadPath(uploadId);
    await mkdir(folder, { recursive: true });
    await writeAtomic(
      this.#tmp,
      join(folder, MANIFEST),
      JSON.stringify({ key, contentType: options.contentType, totalSize: options.totalSize }),
    );
    return uploadId;
  }

  /** The total the live upload declared (unknown for uploads started before totals were recorded). */
  async totalSize(key: string, uploadId: string): Promise<number | undefined> {
    return (await this.#upload(key, uploadId)).totalSize;
  }

  /**
   * Stores the body of a verified part URL as the newest version of its part; answers the quoted ETag.
   * `md5: false`: for a caller that only completes with what this answers, the part is named by a
   * random id of an MD5's form instead of its MD5, which then spares hashing its bytes.
   */
  receivePart(
    url: Extract<SignedUrl, { kind: 'part' }>,
    body: AsyncIterable<Buffer>,
    options: { md5?: boolean } = {},
  ): Promise<string> {
    return this.#storePart(url.key, url.uploadId, url.size, body, options, url.partNumber);
  }

  /**
   * Receives exactly `size` bytes of `body` for a part whose number comes later (see
   * ObjectStore.stagePart): written and synced to a temp file meanwhile, placed once numbered.
   */
  stagePart(
    key: string,
    uploadId: string,
    body: Readable,
    size: number,
    options: { md5?: boolean },
  ): StagedPart {
    let numbered!: (partNumber: number) => void;
    let dropped!: (error: Error) => void;
    const partNumber = new Promise<number>((resolve, reject) => {
      numbered = resolve;
      dropped = reject;
    });
    // Awaited only once every byte is in: a discard before then must not go unhandled.
    partNumber.catch(() => undefined);
    let discarded = false;
    // Not destroyed when a discard stops the reading: the request still gets its answer.
    const chunks = body.iterator({ destroyOnReturn: false });
    async function* unlessDiscarded() {
      try {
        for await (const chunk of chunks) {
          if (discarded) throw new StoreError('InvalidArgument', 'The part was discarded');
          yield chunk;
        }
      } finally {
        // The rest is read and dropped, as Node does with a body nobody read, so that a client still
        // sending gets to its answer.
        if (discarded) body.resume();
      }
    }
    const stored = this.#storePart(key, uploadId, size, unlessDiscarded(), options, partNumber);
    stored.catch(() => undefined);
    return {
      place: (number) => {
        numbered(number);
        return stored;
      },
      // Not waiting for the temp file's removal: it comes with the body's next bytes (or its end),
      // which a stalled client may hold back, and the answer must not wait for them.
      discard: async () => {
        discarded = true;
        dropped(new StoreError('InvalidArgument', 'The part was discarded'));
      },
    };
  }

  async #storePart(
    key: string,
    uploadId: string,
    size: number | undefined,
    body: AsyncIterable<Buffer>,
    options: { md5?: boolean },
    numbered: number | Promise<number>,
  ): Promise<string> {
    const { folder, totalSize } = await this.#upload(key, uploadId, true);
    if (size !== undefined) checkPartSize(size, totalSize);
    const max = Math.min(totalSize ?? MAX_PART_SIZE, MAX_PART_SIZE);
    // A part URL signed for a size takes exactly that many bytes, as a whole-object URL does.
    const limits = size === undefined ? { max } : { exact: size, max: size };
    const hashed = options.md5 !== false;
    let first = false;
    let name = '';
    let partFolder = '';
    await writeStream(this.#tmp, body, limits, hashed ? 'md5' : null, async (tmp, md5, written) => {
      const partNumber = await numbered;
      partFolder = join(folder, String(partNumber));
      name = hashed ? md5 : randomBytes(16).toString('hex');
      first = await this.#parts.place(uploadId, folder, { partNumber, name, size: written, tmp }, totalSize);
      await syncFolder(partFolder);
    });
    if (!first) await dropOlderVersions(partFolder, name);
    this.#digests.advance(uploadId, folder);
    return `"${name}"`;
  }

  async listParts(key: string, uploadId: string): Promise<PartInfo[]> {
    const { folder } = await this.#upload(key, uploadId);
    return (await storedParts(folder)).map(({ partNumber, name, size }) => ({
      partNumber,
      etag: `"${name}"`,
      size,
    }));
  }

  async complete(
    key: string,
    uploadId: string,
    parts: { partNumber: number; etag: string }[],
  ): Promise<ObjectInfo> {
    const { folder } = await this.#upload(key, uploadId);
    const { files, etag } = await partFiles(folder, parts);
    await this.#objects.refuseExisting(key);
    // The SHA-256 of the parts hashed while they arrived, when they are the first parts completed.
    let running = await this.#digests.stop(uploadId);
    if (running && !running.parts.every((part, index) => part.path === files[index])) {
      await running.digest.abort();
      running = undefined;
    }
    // The parts become the object's segments by renaming (which keeps their identity): nothing is copied.
    const segments = this.#objects.segmentsFolder(key);
    const moved: [part: string, segment: string][] = [];
    let digest = running?.digest;
    let info: ObjectInfo;
    try {
      await makeFolder(segments); // in the key's folder, which a delete of another key may prune
      const sizes: number[] = [];
      for (const [index, file] of files.entries()) {
        const segment = join(segments, String(index));
        await rename(file, segment);
        moved.push([file, segment]);
        const stats = await stat(segment);
        sizes.push(stats.size);
        if (
          running &&
          index < running.parts.length &&
          running.parts[index]!.identity !== fileIdentity(stats)
        ) {
          await running.digest.abort(); // replaced after it was hashed, by a version of the same name
          running = undefined;
        }
      }
      digest = running?.digest ?? writers.digest('sha256');
      for (const [, segment] of moved.slice(running?.parts.length ?? 0)) await digest.add(segment);
      await syncFolder(segments);
      info = {
        size: sizes.reduce((sum, size) => sum + size, 0),
        etag,
        sha256: await digest.finish(),
      };
      await this.#objects.writeSidecar(key, { ...info, segments: sizes });
    } catch (error) {
      // Until the sidecar is written the object does not exist: put the parts back, so that the upload
      // can be completed again.
      await (digest ?? running?.digest)?.abort();
      for (const [part, segment] of moved) await rename(segment, part).catch(() => undefined);
      await rm(segments, { recursive: true, force: true });
      throw error;
    }
    // The object exists. The upload ends with its manifest (no part is accepted after that); what is
    // left of it (stray parts) is only tidied up.
    this.#parts.forget(uploadId);
    this.#manifests.delete(uploadId);
    await rm(join(folder, MANIFEST), { force: true }).catch(() => undefined);
    await rm(folder, { recursive: true, force: true }).catch(() => undefined);
    return info;
  }

  async abort(key: string, uploadId: string): Promise<void> {
    assertKey(key);
    if (!UPLOAD_ID.test(uploadId)) return;
    try {
      await this.#upload(key, uploadId);
    } catch (error) {
      if (isStoreError(error, 'NoSuchUpload')) return;
      throw error;
    }
    await this.#forget(uploadId);
    await rm(this.#uploadPath(uploadId), { recursive: true, force: true });
  }

  /** Removes the uploads left over (see isStaleUpload) as of `cutoff` (ms since the epoch); answers how many. */
  async removeStale(cutoff: number, keep: (key: string) => Promise<boolean>): Promise<number> {
    let removed = 0;
    for (const uploadId of await entries(this.#root)) {
      const folder = this.#uploadPath(uploadId);
      if (!UPLOAD_ID.test(uploadId) || !(await isStaleUpload(folder, MANIFEST, cutoff, keep))) continue;
      await this.#forget(uploadId);
      await rm(folder, { recursive: true, force: true });
      removed++;
    }
    return removed;
  }

  /** Releases the running digests. */
  async close(): Promise<void> {
    await this.#digests.clear();
  }

  /** Drops what this process keeps in memory for an upload that is over. */
  async #forget(uploadId: string): Promise<void> {
    this.#manifests.delete(uploadId);
    await (await this.#digests.stop(uploadId))?.digest.abort();
    this.#parts.forget(uploadId);
  }

  #uploadPath(uploadId: string): string {
    return join(this.#root, uploadId);
  }

  /**
   * The folder of the live upload `uploadId` of `key` and the total it declared (unknown for uploads
   * started before totals were recorded); NoSuchUpload when unknown, finished or aborted. `known`:
   * as this process last read it, when it did (an upload finished elsewhere is then found gone later).
   */
  async #upload(
    key: string,
    uploadId: string,
    known = false,
  ): Promise<{ folder: string; totalSize?: number }> {
    assertKey(key);
    const folder = this.#uploadPath(uploadId);
    if (UPLOAD_ID.test(uploadId)) {
      try {
        let manifest = known ? this.#manifests.get(uploadId) : undefined;
        if (!manifest) {
          manifest = JSON.parse(await readFile(join(folder, MANIFEST), 'utf8')) as Manifest;
          this.#manifests.set(uploadId, manifest);
        }
        if (manifest.key === key) return { folder, totalSize: manifest.totalSize };
      } catch (error) {
        if (!isMissing(error)) throw error;
      }
    }
    throw new StoreError('NoSuchUpload', 'Upload not found');
  }
}
