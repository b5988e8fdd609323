import { Readable } from 'node:stream';

/**
 * Cuts a stream into consecutive pieces of given sizes, each a stream of its own read after the one
 * before: the parts of one long PATCH. A piece ends short when the source does, and fails with it.
 * `take` gathers a piece in memory instead, for a body whose length comes only with its end.
 */
export class ByteCutter {
  readonly #chunks: AsyncIterator<Buffer>;
  /** What the last chunk held past the piece it ended. */
  #left: Buffer | undefined;

  constructor(source: AsyncIterable<Buffer>) {
    this.#chunks = source[Symbol.asyncIterator]();
  }

  /** Up to `most` next bytes, read in full, and whether the source ended with them. */
  async take(most: number): Promise<{ bytes: Buffer; ended: boolean }> {
    const chunks: Buffer[] = [];
    let missing = most;
    for (;;) {
      let chunk = this.#left;
      this.#left = undefined;
      if (!chunk) {
        const read = await this.#chunks.next();
        if (read.done) return { bytes: Buffer.concat(chunks), ended: true };
        chunk = read.value;
      }
      if (chunk.length > missing) {
        this.#left = chunk.subarray(missing);
        chunk = chunk.subarray(0, missing);
      }
      missing -= chunk.length;
      chunks.push(chunk);
      if (missing === 0 && this.#left !== undefined) return { bytes: Buffer.concat(chunks), ended: false };
    }
  }

  /** The next `size` bytes. */
  next(size: number): Readable {
    const cutter = this;
    return Readable.from(
      (async function* () {
        let missing = size;
        while (missing > 0) {
          let chunk = cutter.#left;
          cutter.#left = undefined;
          if (!chunk) {
            const read = await cutter.#chunks.next();
            if (read.done) return;
            chunk = read.value;
          }
          if (chunk.length > missing) {
            cutter.#left = chunk.subarray(missing);
            chunk = chunk.subarray(0, missing);
          }
          missing -= chunk.length;
          yield chunk;
        }
      })(),
    );
  }
}
