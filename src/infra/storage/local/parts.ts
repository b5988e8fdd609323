import { createHash } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { MAX_PART_SIZE, MIN_PART_SIZE, STORED_PER_DECLARED_BYTE, StoreError } from '../object-store.ts';
import { entries, isMissing } from './files.ts';

/**
 * The name of a part's file in its part folder: the MD5 hex of its bytes, or a random id of the same
 * form for a part written without its MD5 (see LocalMultipart.receivePart); either is its ETag.
 */
const PART_NAME = /^[0-9a-f]{32}$/;
/**
 * Multipart uploads a store keeps state for in memory at once (a running digest, the part sizes);
 * past that, the least recently used lose it (complete then hashes from scratch, sizes are read again).
 */
export const MAX_TRACKED_UPLOADS = 256;

/** A part URL signed for `size` bytes must be able to hold them: at most MAX_PART_SIZE and the upload's total. */
export function checkPartSize(size: number, totalSize: number | undefined): void {
  if (!Number.isSafeInteger(size) || size < 0 || size > MAX_PART_SIZE) {
    throw new StoreError('InvalidArgument', `A part holds from 0 to ${MAX_PART_SIZE} bytes`, {
      field: 'size',
    });
  }
  if (totalSize !== undefined && size > totalSize) {
    throw new StoreError(
      'InvalidArgument',
      `A part cannot hold more than the ${totalSize} bytes of its upload`,
      {
        field: 'size',
        total_size: totalSize,
      },
    );
  }
}

/** The newest stored version of part `partNumber` in an upload's `folder` (a re-upload replaces it). */
export async function newestPart(
  folder: string,
  partNumber: number,
): Promise<{ name: string; size: number } | undefined> {
  const partFolder = join(folder, String(partNumber));
  let newest: { name: string; size: number; mtimeMs: number } | undefined;
  for (const name of await readdir(partFolder).catch(() => [])) {
    const info = PART_NAME.test(name) ? await stat(join(partFolder, name)).catch(() => undefined) : undefined;
    if (info && (!newest || info.mtimeMs > newest.mtimeMs))
      newest = { name, size: info.size, mtimeMs: info.mtimeMs };
  }
  return newest && { name: newest.name, size: newest.size };
}

/** The newest version of every part in an upload's `folder`, by ascending part number. */
export async function storedParts(
  folder: string,
): Promise<{ partNumber: number; name: string; size: number }[]> {
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
 * The files of the parts named at complete, in order, and the ETag of the object they make up
 * (`"md5(part md5s)-N"`, as S3 computes it); InvalidPart when a part is missing or has another ETag.
 */
export async function partFiles(
  folder: string,
  parts: { partNumber: number; etag: string }[],
): Promise<{ files: string[]; etag: string }> {
  if (parts.length === 0) throw new StoreError('InvalidPart', 'A multipart upload needs at least one part');
  const files: string[] = [];
  const names: Buffer[] = [];
  for (const [index, { partNumber, etag }] of parts.entries()) {
    if (index > 0 && !(partNumber > parts[index - 1]!.partNumber)) {
      throw new StoreError('InvalidPart', 'Parts must be listed in ascending order, each once', {
        part_number: partNumber,
      });
    }
    const name = String(etag).replace(/^"|"$/g, '').toLowerCase();
    const versions = Number.isInteger(partNumber)
      ? await readdir(join(folder, String(partNumber))).catch(() => [])
      : [];
    if (!PART_NAME.test(name) || !versions.includes(name)) {
      const reason = versions.length > 0 ? 'does not match the uploaded part' : 'was not uploaded';
      throw new StoreError('InvalidPart', `Part ${partNumber} ${reason}`, { part_number: partNumber, etag });
    }
    const file = join(folder, String(partNumber), name);
    if (index < parts.length - 1 && (await stat(file)).size < MIN_PART_SIZE) {
      throw new StoreError(
        'InvalidPart',
        `Part ${partNumber} is smaller than 5 MiB and is not the last part`,
        {
          part_number: partNumber,
        },
      );
    }
    files.push(file);
    names.push(Buffer.from(name, 'hex'));
  }
  return {
    files,
    etag: `"${createHash('md5').update(Buffer.concat(names)).digest('hex')}-${parts.length}"`,
  };
}

/** A re-upload replaces the part: older versions than `kept` go (a concurrent newer one stays). */
export async function dropOlderVersions(partFolder: string, kept: string): Promise<void> {
  const newest = await stat(join(partFolder, kept)).catch(() => undefined);
  for (const name of await readdir(partFolder).catch(() => [])) {
    if (name === kept || !newest) continue;
    const other = await stat(join(partFolder, name)).catch(() => undefined);
    if (other && other.mtimeMs <= newest.mtimeMs) await rm(join(partFolder, name), { force: true });
  }
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
    throw new StoreError(
      'TooLarge',
      `With this part the upload would store ${others + size} bytes, more than twice the ${total} it declared`,
      { max_bytes: limit, stored_bytes: others },
    );
  }
}

/** What one process keeps per multipart upload to place its parts: their sizes, and the parts being placed. */
export class PartLedger {
  readonly #sizes = new Map<string, Map<number, number>>();
  readonly #queues = new Map<string, Promise<void>>();

  /**
   * Moves the written part file `tmp` into the upload's `folder` as the version `name` of part
   * `partNumber`, within the stored-bytes bound of `totalSize` (unknown for uploads started before
   * totals were recorded). Checked and placed one part at a time per upload, so that parallel parts
   * cannot all pass. Answers whether it is the part number's first version (no older one to drop).
   */
  place(
    uploadId: string,
    folder: string,
    part: { partNumber: number; name: string; size: number; tmp: string },
    totalSize: number | undefined,
  ): Promise<boolean> {
    const partFolder = join(folder, String(part.partNumber));
    return this.#serially(uploadId, async () => {
      const sizes = await this.#partSizes(uploadId, folder);
      if (totalSize !== undefined) checkStoredBytes(sizes, part.partNumber, part.size, totalSize);
      let first = true;
      try {
        await mkdir(partFolder); // not recursive: a finished or aborted upload must stay gone
      } catch (error) {
        if (isMissing(error)) throw new StoreError('NoSuchUpload', 'Upload not found');
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        first = false;
      }
      try {
        await rename(part.tmp, join(partFolder, part.name));
      } catch (error) {
        // Aborted or completed meanwhile.
        if (isMissing(error)) throw new StoreError('NoSuchUpload', 'Upload not found');
        throw error;
      }
      sizes.set(part.partNumber, part.size);
      return first;
    });
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
    // A missing folder (the upload just ended) has no parts; placing the part then answers NoSuchUpload.
    const names = await entries(folder);
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

  /** Drops the sizes of an upload that is over. */
  forget(uploadId: string): void {
    this.#sizes.delete(uploadId);
  }
}
