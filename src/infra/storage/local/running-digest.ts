import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type FileDigest, type HashedFile, writers } from '../writer-pool.ts';
import { isMissing } from './files.ts';
import { MAX_TRACKED_UPLOADS, newestPart } from './parts.ts';

/** A part hashed by a running digest: its file, and the identity of the file that was read. */
export interface HashedPart extends HashedFile {
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
export class RunningDigest {
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

/** The running digests of one process's multipart uploads, by upload id (oldest first). */
export class RunningDigests {
  readonly #running = new Map<string, RunningDigest>();
  /** Drops everything the store keeps in memory for an upload (its running digest included). */
  readonly #forget: (uploadId: string) => Promise<void>;

  constructor(forget: (uploadId: string) => Promise<void>) {
    this.#forget = forget;
  }

  /** Hashes the upload's next parts in sequence in the background (see RunningDigest). */
  advance(uploadId: string, folder: string): void {
    let running = this.#running.get(uploadId);
    if (!running) {
      running = new RunningDigest(folder);
      this.#running.set(uploadId, running);
      void this.#prune();
    }
    running.advance(async (partNumber) => {
      const part = await newestPart(folder, partNumber);
      return part && join(folder, String(partNumber), part.name);
    });
  }

  /** Stops the upload's running digest: the parts it hashed and their digest, when it did not break. */
  async stop(uploadId: string): Promise<{ parts: HashedPart[]; digest: FileDigest } | undefined> {
    const running = this.#running.get(uploadId);
    if (!running) return undefined;
    this.#running.delete(uploadId);
    const digest = await running.stop();
    return digest && { parts: running.hashed, digest };
  }

  /** Stops and drops every running digest. */
  async clear(): Promise<void> {
    for (const uploadId of [...this.#running.keys()]) await (await this.stop(uploadId))?.digest.abort();
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
}
