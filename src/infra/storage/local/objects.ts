import { createHash } from 'node:crypto';
import { access, rm, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { type ByteRange, type ObjectInfo, StoreError } from '../object-store.ts';
import {
  gather,
  isMissing,
  type Limits,
  linkNew,
  NEWLINE,
  readLine,
  SMALL_BODY,
  writeAtomic,
  writeNew,
  writeStream,
} from './files.ts';
import type { Located, Slice } from './slices.ts';

/**
 * The objects of the local store as files (see the layout in store.ts): each object's bytes (a file
 * of its own, its segments, or within its sidecar) and its sidecar, written last. Stored once, found
 * through the sidecar, removed; a completed multipart upload becomes an object through it too
 * (see ObjectSide in multipart.ts). Keys reach this class checked by the store.
 */

const META = '.meta.json';
/** Beside an assembled multipart object: its part files, in order. */
const PARTS = '.parts';

export class LocalObjects {
  readonly #dir: string;
  /** Where files are written before they are renamed into place. */
  readonly #tmp: string;

  constructor(options: { dir: string; tmp: string }) {
    this.#dir = options.dir;
    this.#tmp = options.tmp;
  }

  /** The folder that holds an assembled object's segments: its part files, in order. */
  segmentsFolder(key: string): string {
    return this.#path(key) + PARTS;
  }

  async locate(key: string): Promise<Located | undefined> {
    const path = this.#path(key);
    const meta = await this.readMeta(key);
    if (!meta) return undefined;
    const pieces: { path: string; size: number; at: number; bytes?: Buffer }[] = meta.segments
      ? meta.segments.map((size, index) => ({ path: join(path + PARTS, String(index)), size, at: 0 }))
      : meta.inlineAt !== undefined
        ? [{ path: path + META, size: meta.size, at: meta.inlineAt, bytes: meta.inline }]
        : [{ path, size: meta.size, at: 0 }];
    const slices = (range?: ByteRange): Slice[] => {
      const start = range?.start ?? 0;
      const end = range?.end ?? meta.size - 1;
      const found: Slice[] = [];
      let offset = 0;
      for (const piece of pieces) {
        const from = Math.max(start, offset);
        const to = Math.min(end, offset + piece.size - 1);
        if (from <= to) {
          const bytes = piece.bytes?.subarray(from - offset, to - offset + 1);
          found.push({
            path: piece.path,
            start: piece.at + from - offset,
            end: piece.at + to - offset,
            bytes,
          });
        }
        offset += piece.size;
      }
      return found;
    };
    return { size: meta.size, etag: meta.etag, sha256: meta.sha256, slices };
  }

  async objectFiles(key: string): Promise<string[]> {
    const meta = await this.readMeta(key);
    if (!meta) return [];
    if (meta.inlineAt !== undefined) return [key + META];
    const bytes = meta.segments ? meta.segments.map((_, index) => `${key}${PARTS}/${index}`) : [key];
    return [...bytes, key + META];
  }

  async ownFile(key: string): Promise<{ path: string; size: number } | undefined> {
    const meta = await this.readMeta(key);
    if (!meta) throw new StoreError('NoSuchKey', 'Object not found');
    if (meta.segments || meta.inlineAt !== undefined) return undefined;
    return { path: this.#path(key), size: meta.size };
  }

  /** Removes the files of the object `key`, then the folders it leaves empty. */
  async remove(key: string): Promise<void> {
    const path = this.#path(key);
    await rm(path + META, { force: true });
    await rm(path, { force: true });
    await rm(path + PARTS, { recursive: true, force: true });
    // Prune the folders the key leaves empty; an object being stored into one of them makes it again.
    const segments = key.split('/');
    for (let depth = segments.length - 1; depth > 0; depth--) {
      try {
        await rmdir(join(this.#dir, ...segments.slice(0, depth)));
      } catch {
        break;
      }
    }
  }

  #path(key: string): string {
    return join(this.#dir, ...key.split('/'));
  }

  /**
   * Keys name one immutable object: an uploaded one is never replaced through a still-valid URL.
   * Only whether its sidecar exists (a read of it cost four system calls per PUT).
   */
  async refuseExisting(key: string): Promise<void> {
    try {
      await access(this.#path(key) + META);
    } catch (error) {
      if (isMissing(error)) return;
      throw error;
    }
    throw new StoreError('AlreadyExists', 'The object has already been uploaded', { key });
  }

  /**
   * Writes `source` as the object `key`, then its sidecar (which makes it visible). The key is claimed
   * with a hard link, which fails when it exists: of concurrent PUTs through one URL exactly one wins,
   * and no bytes ever replace an object (a rename would).
   */
  async storeObject(
    key: string,
    source: AsyncIterable<Buffer>,
    limits: Limits,
    etagOf?: () => string,
  ): Promise<ObjectInfo> {
    const path = this.#path(key);
    if (limits.exact !== undefined && limits.exact <= SMALL_BODY)
      return this.#storeInline(key, source, limits, etagOf);
    const { size, digest } = await writeStream(this.#tmp, source, limits, 'sha256', async (tmp) => {
      // A delete of another key in the same folder (the bytes of a tus upload that went into a part,
      // while its next bytes are stored) may prune the folder (see linkNew). An object stored meanwhile
      // makes the link fail (its bytes are linked before its sidecar is written, and deleted after it).
      if (!(await linkNew(tmp, path))) {
        throw new StoreError('AlreadyExists', 'The object has already been uploaded', { key });
      }
      await unlink(tmp).catch((error: unknown) => {
        if (!isMissing(error)) throw error;
      });
    });
    const info: ObjectInfo = { size, etag: `"${etagOf?.() ?? digest}"`, sha256: digest };
    try {
      await this.writeSidecar(key, info);
    } catch (error) {
      // Without its sidecar the object does not exist: its bytes go too, so that the URL can be used again.
      await rm(path, { force: true }).catch(() => undefined);
      throw error;
    }
    return info;
  }

  /** A small object stored in its sidecar (see the layout in store.ts); claimed, as any object is, only when absent. */
  async #storeInline(
    key: string,
    source: AsyncIterable<Buffer>,
    limits: Limits,
    etagOf?: () => string,
  ): Promise<ObjectInfo> {
    const bytes = await gather(source, limits);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const info: ObjectInfo = { size: bytes.length, etag: `"${etagOf?.() ?? sha256}"`, sha256 };
    const line = Buffer.from(`${JSON.stringify({ ...info, inline: true })}\n`);
    if (!(await writeNew(this.#tmp, this.#path(key) + META, Buffer.concat([line, bytes])))) {
      throw new StoreError('AlreadyExists', 'The object has already been uploaded', { key });
    }
    return info;
  }

  /**
   * The sidecar of `key`, none when the object does not exist; `inlineAt` is where the bytes of an
   * object stored in its sidecar begin, and `inline` those bytes when the read of its line brought
   * them all (a small object); a larger one's are left to `read`.
   */
  async readMeta(
    key: string,
  ): Promise<(ObjectInfo & { segments?: number[]; inlineAt?: number; inline?: Buffer }) | undefined> {
    let read: { line: Buffer; after: Buffer };
    try {
      read = await readLine(this.#path(key) + META);
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
    const { line, after } = read;
    // A newline ends the line of a sidecar that holds its object's bytes (JSON never has a raw one).
    if (line.at(-1) !== NEWLINE) return JSON.parse(line.toString('utf8'));
    const { inline: _, ...meta } = JSON.parse(line.toString('utf8'));
    // A small object came whole with its line: it is served from memory.
    return { ...meta, inlineAt: line.length, inline: after.length === meta.size ? after : undefined };
  }

  /** Writes the sidecar of the object `key`, which makes it exist (an assembled one lists its segments). */
  writeSidecar(key: string, meta: ObjectInfo & { segments?: number[] }): Promise<void> {
    return writeAtomic(this.#tmp, this.#path(key) + META, JSON.stringify(meta));
  }
}
