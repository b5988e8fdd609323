import { createHash } from 'node:crypto';
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { crc32 } from 'node:zlib';
import { Crc32c } from '@aws-crypto/crc32c';
import { Crc64Nvme } from '@aws-sdk/crc64-nvme';
import type { ContentChecksum } from '../../modules/files/repo.ts';
import { invalidRequest, SigV4Error } from './errors.ts';

/** The additional checksums S3 accepts, by the suffix of their `x-amz-checksum-*` header. */
export const CHECKSUM_ALGORITHMS = ['crc32', 'crc32c', 'crc64nvme', 'sha1', 'sha256'] as const;
export type ChecksumAlgorithm = (typeof CHECKSUM_ALGORITHMS)[number];

/** Digest length in bytes, which fixes the length of a well-formed base64 value. */
const DIGEST_BYTES: Record<ChecksumAlgorithm | 'md5', number> = {
  crc32: 4,
  crc32c: 4,
  crc64nvme: 8,
  sha1: 20,
  sha256: 32,
  md5: 16,
};

/** How S3 names each algorithm in its messages ("The CRC32 you specified did not match …"). */
const DISPLAY: Record<ChecksumAlgorithm | 'md5', string> = {
  crc32: 'CRC32',
  crc32c: 'CRC32C',
  crc64nvme: 'CRC64NVME',
  sha1: 'SHA1',
  sha256: 'SHA256',
  md5: 'Content-MD5',
};

export interface BodyHasher {
  update(data: Uint8Array): void;
  /** The digest, big-endian for the CRCs, as S3 base64-encodes it. */
  digest(): Promise<Buffer>;
}

class Crc32Hasher implements BodyHasher {
  #value = 0;
  update(data: Uint8Array): void {
    this.#value = crc32(data, this.#value);
  }
  async digest(): Promise<Buffer> {
    const out = Buffer.alloc(4);
    out.writeUInt32BE(this.#value >>> 0);
    return out;
  }
}

class Crc32cHasher implements BodyHasher {
  readonly #crc = new Crc32c();
  update(data: Uint8Array): void {
    this.#crc.update(data);
  }
  async digest(): Promise<Buffer> {
    const out = Buffer.alloc(4);
    out.writeUInt32BE(this.#crc.digest() >>> 0);
    return out;
  }
}

class Crc64NvmeHasher implements BodyHasher {
  readonly #crc = new Crc64Nvme();
  update(data: Uint8Array): void {
    this.#crc.update(data);
  }
  async digest(): Promise<Buffer> {
    return Buffer.from(await this.#crc.digest());
  }
}

class NodeHasher implements BodyHasher {
  readonly #hash;
  constructor(algorithm: 'sha1' | 'sha256' | 'md5') {
    this.#hash = createHash(algorithm);
  }
  update(data: Uint8Array): void {
    this.#hash.update(data);
  }
  async digest(): Promise<Buffer> {
    return this.#hash.digest();
  }
}

/** An incremental hasher for `algorithm`, so a body is checked without being held in memory. */
export function createHasher(algorithm: ChecksumAlgorithm | 'md5'): BodyHasher {
  switch (algorithm) {
    case 'crc32':
      return new Crc32Hasher();
    case 'crc32c':
      return new Crc32cHasher();
    case 'crc64nvme':
      return new Crc64NvmeHasher();
    default:
      return new NodeHasher(algorithm);
  }
}

/** The algorithm a header or trailer name such as `x-amz-checksum-crc32` stands for. */
export function algorithmOfHeader(name: string): ChecksumAlgorithm | undefined {
  const lower = name.trim().toLowerCase();
  if (!lower.startsWith('x-amz-checksum-')) return undefined;
  const suffix = lower.slice('x-amz-checksum-'.length);
  return (CHECKSUM_ALGORITHMS as readonly string[]).includes(suffix)
    ? (suffix as ChecksumAlgorithm)
    : undefined;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Whether `value` is the canonical base64 of a digest of `algorithm` (right length, no stray text). */
export function isWellFormedDigest(algorithm: ChecksumAlgorithm | 'md5', value: string): boolean {
  if (!BASE64.test(value) || value.length % 4 !== 0) return false;
  const bytes = Buffer.from(value, 'base64');
  return bytes.length === DIGEST_BYTES[algorithm] && bytes.toString('base64') === value;
}

/** Checks the shape of a client's `x-amz-checksum-*` value; S3 refuses a malformed one before the body. */
export function expectChecksum(
  algorithm: ChecksumAlgorithm,
  value: string,
  where = 'header',
): ContentChecksum<ChecksumAlgorithm> {
  const trimmed = value.trim();
  if (!isWellFormedDigest(algorithm, trimmed))
    throw new SigV4Error('InvalidRequest', `Value for x-amz-checksum-${algorithm} ${where} is invalid.`);
  return { algorithm, value: trimmed };
}

/** Checks the shape of a `Content-MD5` header (base64 of 16 bytes). */
export function expectContentMd5(value: string): string {
  const trimmed = value.trim();
  if (!isWellFormedDigest('md5', trimmed)) throw new SigV4Error('InvalidDigest');
  return trimmed;
}

/** The error S3 answers when a body's digest differs from the one the client sent. */
export function digestMismatch(algorithm: ChecksumAlgorithm | 'md5'): SigV4Error {
  return new SigV4Error(
    'BadDigest',
    algorithm === 'md5'
      ? 'The Content-MD5 you specified did not match what we received.'
      : `The ${DISPLAY[algorithm]} you specified did not match the calculated checksum.`,
  );
}

/** The algorithm a CopyObject's `x-amz-checksum-algorithm` names (any case); undefined without one. */
export function requestedAlgorithm(header: string | string[] | undefined): ChecksumAlgorithm | undefined {
  if (header === undefined) return undefined;
  const named = (Array.isArray(header) ? header.join(',') : header).trim().toLowerCase();
  if (!(CHECKSUM_ALGORITHMS as readonly string[]).includes(named)) {
    throw invalidRequest(
      'Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]',
    );
  }
  return named as ChecksumAlgorithm;
}

/** A checksum of `algorithm` computed as bytes pass, told as S3 writes it once they have all passed. */
export class Checksummer {
  readonly algorithm: ChecksumAlgorithm;
  readonly #hasher: BodyHasher;

  constructor(algorithm: ChecksumAlgorithm) {
    this.algorithm = algorithm;
    this.#hasher = createHasher(algorithm);
  }

  update(data: Uint8Array): void {
    this.#hasher.update(data);
  }

  async checksum(): Promise<ContentChecksum<ChecksumAlgorithm>> {
    return { algorithm: this.algorithm, value: (await this.#hasher.digest()).toString('base64') };
  }
}

/** The bytes of `source` as they pass, telling their `algorithm` checksum once they have all passed. */
class ChecksummingStream extends Transform {
  readonly #checksummer: Checksummer;
  checksum: ContentChecksum<ChecksumAlgorithm> | undefined;

  constructor(algorithm: ChecksumAlgorithm) {
    super();
    this.#checksummer = new Checksummer(algorithm);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#checksummer.update(chunk);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.#checksummer.checksum().then((checksum) => {
      this.checksum = checksum;
      callback();
    }, callback);
  }
}

/** `source`'s bytes, with their `algorithm` checksum computed on the way (a copy that asks for one). */
export function checksumming(
  source: Readable,
  algorithm: ChecksumAlgorithm,
): Readable & { readonly checksum?: ContentChecksum<ChecksumAlgorithm> } {
  const stream = new ChecksummingStream(algorithm);
  source.on('error', (error) => stream.destroy(error));
  return source.pipe(stream);
}

/** A checksum as S3 answers it in a header (`x-amz-checksum-crc32: …`); none for no checksum. */
export const checksumHeader = (checksum: ContentChecksum | undefined): Record<string, string> =>
  checksum ? { [`x-amz-checksum-${checksum.algorithm}`]: checksum.value } : {};

/**
 * The `x-amz-checksum-*` headers that stored content answers under `x-amz-checksum-mode: ENABLED`:
 * the checksum its client sent with it, and the SHA-256 Coffer keeps of every content (once it is
 * known: content assembled from parts has it once read after completion). Both are of the whole
 * object (S3's FULL_OBJECT type).
 */
export function storedChecksumHeaders(content: {
  checksum: ContentChecksum | undefined;
  sha256: string | undefined;
}): Record<string, string> {
  const sha256 = content.sha256
    ? { algorithm: 'sha256', value: Buffer.from(content.sha256, 'hex').toString('base64') }
    : undefined;
  const headers = { ...checksumHeader(content.checksum), ...checksumHeader(sha256) };
  return Object.keys(headers).length > 0 ? { ...headers, 'x-amz-checksum-type': 'FULL_OBJECT' } : {};
}

/** A checksum as a CopyObjectResult names it: `ChecksumCRC32` and so on, with its type. */
export function checksumElements(checksum: ContentChecksum | undefined): Record<string, string> {
  if (!checksum) return {};
  const display = DISPLAY[checksum.algorithm as ChecksumAlgorithm];
  return { ChecksumType: 'FULL_OBJECT', [`Checksum${display}`]: checksum.value };
}
