import { randomUUID } from 'node:crypto';
import { type FileHandle, open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ByteCutter } from './cutter.ts';

/**
 * A temporary file holding one piece of a body at a time: a body sent without its length is received
 * a part at a time onto disk, whose size is then known, instead of into memory. The file is unlinked
 * as soon as it is open, so that nothing of it outlives the process.
 */
export class Spool {
  readonly #file: FileHandle;
  /** The file's path while it could not be unlinked yet (a system that keeps open files named). */
  #path: string | undefined;
  /** Bytes of finished pieces read back; with the current one's, what the store has taken so far. */
  #fed = 0;
  #reading: { bytesRead: number } | undefined;
  #filled = 0;

  private constructor(file: FileHandle, path: string | undefined) {
    this.#file = file;
    this.#path = path;
  }

  static async open(): Promise<Spool> {
    const path = join(tmpdir(), `coffer-tus-${randomUUID()}`);
    const file = await open(path, 'wx+', 0o600);
    const kept = await unlink(path).then(
      () => undefined,
      () => path,
    );
    return new Spool(file, kept);
  }

  /**
   * Writes the next bytes of `source`, at most `most`, over the piece before; answers how many it
   * wrote and whether the source ended with them.
   */
  async fill(source: ByteCutter, most: number): Promise<{ size: number; ended: boolean }> {
    this.#settle();
    this.#filled = 0;
    for await (const chunk of source.next(most) as AsyncIterable<Buffer>) {
      for (let at = 0; at < chunk.length; ) {
        const { bytesWritten } = await this.#file.write(chunk, at, chunk.length - at, this.#filled + at);
        at += bytesWritten;
      }
      this.#filled += chunk.length;
    }
    return { size: this.#filled, ended: this.#filled < most || (await source.ended()) };
  }

  /** The bytes of the piece being filled written so far: what a body that failed on the way carried. */
  get filled(): number {
    return this.#filled;
  }

  /** The `size` bytes of the piece last filled. */
  read(size: number): Readable {
    this.#settle();
    if (size === 0) return Readable.from([]);
    const stream = this.#file.createReadStream({ start: 0, end: size - 1, autoClose: false });
    this.#reading = stream;
    return stream;
  }

  /** How many bytes of its pieces the store has read: a PATCH writing one is not stalled. */
  get fed(): number {
    return this.#fed + (this.#reading?.bytesRead ?? 0);
  }

  async close(): Promise<void> {
    await this.#file.close();
    if (this.#path) await unlink(this.#path).catch(() => undefined);
    this.#path = undefined;
  }

  /** Adds what the store read of the last piece to the total: the next piece goes over it. */
  #settle() {
    this.#fed += this.#reading?.bytesRead ?? 0;
    this.#reading = undefined;
  }
}
