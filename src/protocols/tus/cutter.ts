import { Readable } from 'node:stream';

/**
 * Cuts a stream into consecutive pieces of given sizes, each a stream of its own read after the one
 * before: the parts of one long PATCH. A piece ends short when the source does, and fails with it.
 */
export class ByteCutter {
  readonly #chunks: AsyncIterator<Buffer>;
  /** What the last chunk held past the piece it ended. */
  #left: Buffer | undefined;

  constructor(source: AsyncIterable<Buffer>) {
    this.#chunks = source[Symbol.asyncIterator]();
  }

  /** Whether the source has no byte left: for a body whose length comes only with its end. */
  async ended(): Promise<boolean> {
    while (!this.#left?.length) {
      const read = await this.#chunks.next();
      if (read.done) return true;
      this.#left = read.value;
    }
    return false;
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
