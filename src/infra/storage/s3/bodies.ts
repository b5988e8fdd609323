import { createHash } from 'node:crypto';
import { pipeline, type Readable, Transform } from 'node:stream';
import { MAX_PART_SIZE, StoreError } from '../object-store.ts';

/**
 * The bytes sent to the bucket, by a client through a presigned URL or by Coffer itself: how many a
 * PUT or a part may hold, and a body held to exactly the length it declared.
 */

export function checkSize(size: number, field: string): void {
  if (!Number.isSafeInteger(size) || size < 0 || size > MAX_PART_SIZE) {
    throw new StoreError(
      'InvalidArgument',
      `${field} must be a whole number of bytes up to ${MAX_PART_SIZE}`,
      {
        field,
      },
    );
  }
}

/**
 * Passes `body` on while counting and hashing it; fails the stream, before it ends, when it holds
 * more or fewer than `size` bytes, so that a PUT of it is never completed. `failed` aborts when the
 * body fails or its length is wrong, so that a request sending it stops at once.
 */
export function exactly(body: Readable, size: number) {
  const hash = createHash('sha256');
  const failure = new AbortController();
  let seen = 0;
  let problem: StoreError | undefined;
  const refuse = (message: string) => {
    problem = new StoreError('InvalidArgument', message, { size_bytes: size });
    return problem;
  };
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > size) return done(refuse(`The body is longer than the declared ${size} bytes`));
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      done(seen === size ? null : refuse(`The body has ${seen} bytes but ${size} were declared`));
    },
  });
  // pipeline() listens for every stream's errors: a failed body never goes unhandled.
  const stream = pipeline(body, counter, (error) => {
    if (error) failure.abort(error);
  });
  /**
   * What a failed call is answered with: the length when it was wrong (the SDK may report a body cut
   * short in its own words), the body's own error when it failed (a digest its reader checks, a client
   * gone: the caller's to answer, as on the local store), else the call's.
   */
  const blame = (error: unknown) => problem ?? body.errored ?? error;
  return { stream, failed: failure.signal, sha256: () => hash.digest('hex'), blame };
}
