import { createHash, type Hash } from 'node:crypto';
import { finished, type Readable, Transform, type TransformCallback } from 'node:stream';
import { MAX_PART_SIZE } from '../../infra/storage/object-store.ts';
import type { ContentChecksum } from '../../modules/files/repo.ts';
import {
  algorithmOfHeader,
  type BodyHasher,
  type ChecksumAlgorithm,
  Checksummer,
  createHasher,
  digestMismatch,
  expectChecksum,
  expectContentMd5,
} from './checksums.ts';
import { AwsChunkedDecoder } from './chunked.ts';
import { entityTooLarge, invalidArgument, S3Error, SigV4Error } from './errors.ts';
import type { Authenticated } from './types.ts';

export interface VerifiedBodyOptions {
  /**
   * Check the body against the `x-amz-checksum-*` headers (true by default). Turn it off where those
   * headers describe something other than the request body, as on CompleteMultipartUpload, whose
   * checksum is the whole object's. Content-MD5 and trailing checksums are always checked.
   */
  headerChecksums?: boolean;
}

/**
 * The decoded body of an authenticated request. Bytes flow through as they arrive, before the
 * chunk or digest that covers them has been checked: the stream errors with a `SigV4Error` instead
 * of ending when anything fails, so only a consumer that saw 'end' (or a pipeline that resolved)
 * may keep what it read.
 */
export class VerifiedBody extends Transform {
  readonly #decoder: AwsChunkedDecoder | undefined;
  /** The exact number of payload bytes the request announced, when it did. */
  readonly #expectedLength: number | undefined;
  readonly #sha256: { hash: Hash; expected: string } | undefined;
  readonly #checksum: { checksummer: Checksummer; expected: string | undefined } | undefined;
  readonly #md5: { hasher: BodyHasher; expected: string } | undefined;
  #length = 0;
  /** After 'end': the checksum the body was verified against (header or trailer), for S3's response headers. */
  checksum: ContentChecksum<ChecksumAlgorithm> | undefined;

  constructor(auth: Authenticated, options: VerifiedBodyOptions) {
    super();
    const { payload, bodyDigests } = auth;
    const headerChecksums =
      options.headerChecksums === false
        ? []
        : Object.entries(bodyDigests.checksums).map(([name, value]) =>
            expectChecksum(algorithmOfHeader(name)!, value),
          );
    const trailer =
      payload.kind === 'chunked-signed' || payload.kind === 'chunked-unsigned-trailer'
        ? payload.trailer
        : undefined;
    if (headerChecksums.length + (trailer === undefined ? 0 : 1) > 1)
      throw new SigV4Error(
        'InvalidRequest',
        'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.',
      );
    const [header] = headerChecksums;
    const algorithm = trailer ?? header?.algorithm;
    if (algorithm !== undefined)
      this.#checksum = { checksummer: new Checksummer(algorithm), expected: header?.value };
    if (bodyDigests.contentMd5 !== undefined)
      this.#md5 = { hasher: createHasher('md5'), expected: expectContentMd5(bodyDigests.contentMd5) };

    if (payload.kind === 'chunked-signed' || payload.kind === 'chunked-unsigned-trailer') {
      this.#decoder = new AwsChunkedDecoder({
        signing:
          payload.kind === 'chunked-signed'
            ? { key: payload.signingKey, seedSignature: payload.seedSignature }
            : undefined,
        trailer,
        signedTrailer: payload.kind === 'chunked-signed' && payload.signedTrailer,
        decodedLength: payload.decodedLength,
      });
      this.#expectedLength = payload.decodedLength;
    } else this.#expectedLength = auth.contentLength;
    if (payload.kind === 'sha256') this.#sha256 = { hash: createHash('sha256'), expected: payload.hash };
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      if (this.#decoder) for (const slice of this.#decoder.push(chunk)) this.#pass(slice);
      else this.#pass(chunk);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  #pass(data: Buffer): void {
    this.#length += data.length;
    if (this.#expectedLength !== undefined && this.#length > this.#expectedLength)
      throw new SigV4Error('IncompleteBody', 'The request body is longer than its announced length.');
    this.#sha256?.hash.update(data);
    this.#checksum?.checksummer.update(data);
    this.#md5?.hasher.update(data);
    this.push(data);
  }

  override _flush(callback: TransformCallback): void {
    this.#verify().then(() => callback(), callback);
  }

  async #verify(): Promise<void> {
    this.#decoder?.finish();
    if (this.#expectedLength !== undefined && this.#length !== this.#expectedLength)
      throw new SigV4Error('IncompleteBody');
    if (this.#sha256 && this.#sha256.hash.digest('hex') !== this.#sha256.expected)
      throw new SigV4Error('XAmzContentSHA256Mismatch');
    if (this.#checksum) {
      const expected = this.#checksum.expected ?? this.#decoder?.trailerChecksum?.value;
      const actual = await this.#checksum.checksummer.checksum();
      if (expected !== undefined && actual.value !== expected) throw digestMismatch(actual.algorithm);
      this.checksum = actual;
    }
    if (this.#md5 && (await this.#md5.hasher.digest()).toString('base64') !== this.#md5.expected)
      throw digestMismatch('md5');
  }
}

/**
 * The body of an authenticated request, decoded (aws-chunked framing removed) and verified as it
 * streams: the payload hash, every chunk signature, the trailing or header checksum, Content-MD5
 * and the announced length. Nothing is buffered beyond one framing line. Throws at once (before
 * reading) for a malformed checksum header; otherwise failures error the returned stream, for its
 * reader to find (through iteration or a pipeline, which report an error already raised). On such
 * an error `body` is left unread rather than destroyed, so an HTTP server can still answer with
 * the S3 error.
 */
export function verifiedBody(
  body: Readable,
  auth: Authenticated,
  options: VerifiedBodyOptions = {},
): VerifiedBody {
  const verified = new VerifiedBody(auth, options);
  // A small body is checked whole (digest, length) as soon as it has arrived, maybe before its reader
  // starts; a failure then waits in the stream for the reader (iterators and pipelines see it) and
  // must not reach the process as an unhandled 'error'.
  verified.on('error', () => {});
  // Also a body already gone, whose client dropped while the request was authenticated: it emits no
  // more events, and Node's request emits its error only to listeners it had then.
  finished(body, { writable: false }, (error) => {
    if (error) verified.destroy(body.errored ?? error);
  });
  body.pipe(verified);
  return verified;
}

/**
 * The size a PutObject or UploadPart declares: the decoded length of an aws-chunked body, else
 * Content-Length; past S3's 5 GiB for one PUT, EntityTooLarge before a byte is read.
 */
export function declaredSize(
  headers: Record<string, string | string[] | undefined>,
  decoded?: number,
): number {
  const size = decoded ?? contentLengthOf(headers['content-length']);
  if (size > MAX_PART_SIZE) throw entityTooLarge(size, MAX_PART_SIZE);
  return size;
}

function contentLengthOf(length: string | string[] | undefined): number {
  if (typeof length !== 'string') {
    throw new S3Error(411, 'MissingContentLength', 'You must provide the Content-Length HTTP header.');
  }
  if (!/^\d+$/.test(length)) throw invalidArgument('Content-Length must be a whole number of bytes');
  return Number(length);
}
