import { createHash, createHmac, type Hash, type KeyObject, timingSafeEqual } from 'node:crypto';
import type { ContentChecksum } from '../../modules/files/repo.ts';
import { algorithmOfHeader, type ChecksumAlgorithm, expectChecksum } from './checksums.ts';
import { SigV4Error } from './errors.ts';

/** SHA-256 of the empty string: the "hash of the chunk's headers" line every chunk string-to-sign carries. */
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/**
 * The derived SigV4 signing key of one request, with what chunk signatures chain from. The key stays
 * in a private field: the object can be logged or serialised without exposing it.
 */
export class SigningKey {
  readonly #key: KeyObject | Uint8Array;
  /** The request's X-Amz-Date (yyyyMMddTHHmmssZ). */
  readonly amzDate: string;
  /** The credential scope, `date/region/s3/aws4_request`. */
  readonly scope: string;

  constructor(key: KeyObject | Uint8Array, amzDate: string, scope: string) {
    this.#key = key;
    this.amzDate = amzDate;
    this.scope = scope;
  }

  /** HMAC-SHA256 of `stringToSign` under the key, as lowercase hex. */
  sign(stringToSign: string): string {
    return createHmac('sha256', this.#key).update(stringToSign).digest('hex');
  }

  toJSON() {
    return { amzDate: this.amzDate, scope: this.scope };
  }
}

/** Equality of two lowercase hex signatures that leaks nothing about where they differ. */
export function sameSignature(expected: string, provided: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(provided);
  return a.length === b.length && timingSafeEqual(a, b);
}

export interface ChunkedOptions {
  /** For STREAMING-AWS4-HMAC-SHA256-PAYLOAD(-TRAILER): every chunk is signed, chained from the seed. */
  signing?: { key: SigningKey; seedSignature: string };
  /** The checksum trailer announced by `x-amz-trailer`, if any. */
  trailer?: ChecksumAlgorithm;
  /** Whether the trailer section ends with `x-amz-trailer-signature` (the signed -TRAILER variant). */
  signedTrailer: boolean;
  /** `x-amz-decoded-content-length`: the payload bytes the framing must carry, exactly. */
  decodedLength: number;
}

/** A chunk-size line is `hex;chunk-signature=<64 hex>` (~90 bytes) and a trailer line is shorter still. */
const MAX_LINE = 4096;
const MAX_TRAILER_LINES = 16;
const SIGNED_SIZE_LINE = /^([0-9a-fA-F]{1,15});chunk-signature=([0-9a-f]{64})$/;
const UNSIGNED_SIZE_LINE = /^([0-9a-fA-F]{1,15})(?:;.*)?$/;
const CRLF = Buffer.from('\r\n');

const malformed = (why: string) => new SigV4Error('InvalidRequest', `Malformed aws-chunked body: ${why}.`);
const badLength = (why: string) =>
  new SigV4Error('IncompleteBody', `The decoded body ${why} the x-amz-decoded-content-length header.`);
const badSignature = () => new SigV4Error('SignatureDoesNotMatch');

type State = 'size' | 'data' | 'data-end' | 'trailer' | 'done';

/**
 * A push decoder for the `aws-chunked` content encoding S3 uses for streaming uploads:
 *
 *     <hex size>[;chunk-signature=<sig>]\r\n<data>\r\n … 0[;chunk-signature=<sig>]\r\n
 *     [<trailer name>:<value>\r\n … [x-amz-trailer-signature:<sig>\r\n]]\r\n
 *
 * It hands back the payload as slices of the buffers it is given (nothing is copied or held beyond
 * one framing line), checks each chunk's signature once the chunk is complete, and throws a
 * `SigV4Error` at the first fault. Data is returned before its chunk is verified, so the consumer
 * must not treat the payload as authentic until `finish()` returns.
 */
export class AwsChunkedDecoder {
  readonly #options: ChunkedOptions;
  #state: State = 'size';
  #line: Buffer[] = [];
  #lineLength = 0;
  /** Bytes of the current chunk's data still to come, or of the CRLF after it. */
  #remaining = 0;
  #chunkSignature = '';
  #chunkHash: Hash | undefined;
  #previousSignature: string;
  #decoded = 0;
  #trailerLines = 0;
  #trailers = new Map<string, string>();
  #trailerSignature: string | undefined;
  /** The checksum the trailer carried, once the trailer has been read. */
  trailerChecksum: ContentChecksum<ChecksumAlgorithm> | undefined;

  constructor(options: ChunkedOptions) {
    this.#options = options;
    this.#previousSignature = options.signing?.seedSignature ?? '';
  }

  /** Decodes `input`, returning the payload bytes it carries; throws on the first fault. */
  push(input: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let at = 0;
    while (at < input.length) {
      switch (this.#state) {
        case 'data': {
          const take = Math.min(this.#remaining, input.length - at);
          const slice = input.subarray(at, at + take);
          this.#chunkHash?.update(slice);
          out.push(slice);
          at += take;
          this.#remaining -= take;
          if (this.#remaining === 0) {
            this.#state = 'data-end';
            this.#remaining = 2;
          }
          break;
        }
        case 'data-end': {
          // The CRLF after a chunk's data, which may itself straddle two buffers.
          if (input[at] !== CRLF[2 - this.#remaining]) throw malformed('chunk data is not followed by CRLF');
          at += 1;
          this.#remaining -= 1;
          if (this.#remaining === 0) {
            this.#verifyChunk();
            this.#state = 'size';
          }
          break;
        }
        case 'done':
          throw malformed('data follows the final chunk');
        default: {
          const end = input.indexOf(0x0a, at);
          const stop = end === -1 ? input.length : end + 1;
          this.#lineLength += stop - at;
          if (this.#lineLength > MAX_LINE) throw malformed('a framing line is too long');
          this.#line.push(input.subarray(at, stop));
          at = stop;
          if (end !== -1) this.#takeLine();
        }
      }
    }
    return out;
  }

  /** Call at the end of the input: throws unless the framing, signatures and length were complete. */
  finish(): void {
    if (this.#state === 'trailer' && this.#lineLength === 0) {
      // Some encoders (the JS SDK without a checksum) end after the last line, without the closing CRLF.
      this.#endTrailer();
    }
    if (this.#state !== 'done') {
      if (this.#decoded < this.#options.decodedLength) throw badLength('is shorter than');
      throw new SigV4Error('IncompleteBody', 'The aws-chunked body ended before its final chunk.');
    }
  }

  #takeLine(): void {
    const raw = Buffer.concat(this.#line, this.#lineLength);
    this.#line = [];
    this.#lineLength = 0;
    if (raw.length < 2 || raw[raw.length - 2] !== 0x0d) throw malformed('a line does not end with CRLF');
    // Framing is ASCII; latin1 keeps any stray byte visible to the patterns below instead of mangling it.
    const line = raw.toString('latin1', 0, raw.length - 2);
    if (this.#state === 'size') this.#takeSizeLine(line);
    else this.#takeTrailerLine(line);
  }

  #takeSizeLine(line: string): void {
    const signing = this.#options.signing;
    const match = (signing ? SIGNED_SIZE_LINE : UNSIGNED_SIZE_LINE).exec(line);
    if (!match) throw malformed(signing ? 'a chunk header lacks a valid chunk-signature' : 'bad chunk size');
    const size = Number.parseInt(match[1]!, 16);
    if (this.#decoded + size > this.#options.decodedLength) throw badLength('is longer than');
    this.#decoded += size;
    this.#chunkSignature = match[2] ?? '';
    this.#chunkHash = signing ? createHash('sha256') : undefined;
    if (size > 0) {
      this.#state = 'data';
      this.#remaining = size;
      return;
    }
    this.#verifyChunk();
    if (this.#decoded !== this.#options.decodedLength) throw badLength('is shorter than');
    this.#state = 'trailer';
  }

  /** Checks the signature of the chunk just completed: it signs the chunk's hash and the one before it. */
  #verifyChunk(): void {
    const signing = this.#options.signing;
    if (!signing || !this.#chunkHash) return;
    const expected = signing.key.sign(
      [
        'AWS4-HMAC-SHA256-PAYLOAD',
        signing.key.amzDate,
        signing.key.scope,
        this.#previousSignature,
        EMPTY_SHA256,
        this.#chunkHash.digest('hex'),
      ].join('\n'),
    );
    if (!sameSignature(expected, this.#chunkSignature)) throw badSignature();
    this.#previousSignature = this.#chunkSignature;
    this.#chunkHash = undefined;
  }

  #takeTrailerLine(line: string): void {
    if (line === '') {
      this.#endTrailer();
      return;
    }
    if (++this.#trailerLines > MAX_TRAILER_LINES) throw malformed('too many trailing headers');
    if (this.#trailerSignature !== undefined)
      throw malformed('a trailing header follows the trailer signature');
    const colon = line.indexOf(':');
    if (colon <= 0) throw malformed('a trailing header has no name');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'x-amz-trailer-signature') {
      if (!this.#options.signedTrailer) throw malformed('an unsigned trailer carries a signature');
      this.#trailerSignature = value;
      return;
    }
    if (this.#trailers.has(name)) throw malformed(`${name} is repeated in the trailer`);
    if (algorithmOfHeader(name) === undefined || algorithmOfHeader(name) !== this.#options.trailer)
      throw new SigV4Error(
        'InvalidRequest',
        `The trailing header ${name} was not declared by x-amz-trailer.`,
      );
    this.#trailers.set(name, value);
  }

  #endTrailer(): void {
    const declared = this.#options.trailer;
    if (declared !== undefined) {
      const value = this.#trailers.get(`x-amz-checksum-${declared}`);
      if (value === undefined)
        throw new SigV4Error('IncompleteBody', `The trailing header x-amz-checksum-${declared} is missing.`);
      this.trailerChecksum = expectChecksum(declared, value, 'trailing header');
    }
    const signing = this.#options.signing;
    if (signing && this.#options.signedTrailer) {
      if (this.#trailerSignature === undefined)
        throw new SigV4Error(
          'SignatureDoesNotMatch',
          'The trailer signature (x-amz-trailer-signature) is missing.',
        );
      // The trailing headers are canonicalised like signed headers: `name:value\n`, sorted by name.
      const canonical = [...this.#trailers]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([name, value]) => `${name}:${value}\n`)
        .join('');
      const expected = signing.key.sign(
        [
          'AWS4-HMAC-SHA256-TRAILER',
          signing.key.amzDate,
          signing.key.scope,
          this.#previousSignature,
          createHash('sha256').update(canonical).digest('hex'),
        ].join('\n'),
      );
      if (!sameSignature(expected, this.#trailerSignature)) throw badSignature();
    }
    this.#state = 'done';
  }
}
