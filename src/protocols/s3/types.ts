import type { ChecksumAlgorithm } from './checksums.ts';
import type { SigningKey } from './chunked.ts';

/** An incoming S3 request, as the HTTP layer received it. */
export interface S3Request {
  method: string;
  /** The path as sent, still percent-encoded (`/s3/bucket/a%20key`), without the query. */
  path: string;
  /** The raw query string, without the `?`. */
  query: string;
  /** Lowercase names; values as Node's HTTP parser gives them. */
  headers: Readonly<Record<string, string | readonly string[] | undefined>>;
}

/** Finds the secret of an access key; may throw `SigV4Error('ExpiredToken' | 'InvalidToken')` itself. */
export type CredentialLookup = (
  accessKeyId: string,
  sessionToken: string | undefined,
) => Promise<{ secretAccessKey: string } | undefined>;

export interface AuthenticateOptions {
  /** The only region this endpoint signs for. */
  region: string;
  /** The server's clock (tests pass a fixed one). */
  now?: Date;
  /** The clock skew tolerated between client and server, 900 s (S3's 15 minutes) by default. */
  maxSkewSeconds?: number;
}

/** What the body of an authenticated request must be checked against. */
export type Payload =
  /** `x-amz-content-sha256` is the body's SHA-256, which the body must match. */
  | { kind: 'sha256'; hash: string }
  /** UNSIGNED-PAYLOAD, and every presigned URL that does not name a hash. */
  | { kind: 'unsigned' }
  /** STREAMING-AWS4-HMAC-SHA256-PAYLOAD(-TRAILER): aws-chunked, every chunk signed. */
  | {
      kind: 'chunked-signed';
      seedSignature: string;
      signingKey: SigningKey;
      decodedLength: number;
      trailer: ChecksumAlgorithm | undefined;
      signedTrailer: boolean;
    }
  /** STREAMING-UNSIGNED-PAYLOAD-TRAILER: aws-chunked, integrity from the trailing checksum. */
  | { kind: 'chunked-unsigned-trailer'; decodedLength: number; trailer: ChecksumAlgorithm | undefined };

/** A request whose signature checked out. */
export interface Authenticated {
  accessKeyId: string;
  sessionToken?: string;
  /** Query-string (presigned URL) rather than Authorization-header authentication. */
  presigned: boolean;
  /** The headers the signature covers, lowercase. */
  signedHeaders: readonly string[];
  payload: Payload;
  /**
   * The whole-body digests the client sent, unchecked until `verifiedBody`: `x-amz-checksum-*` and
   * `content-md5` headers (and, on a presigned URL, the `x-amz-checksum-*` parameters it carries).
   */
  bodyDigests: { checksums: Readonly<Record<string, string>>; contentMd5: string | undefined };
  /** `content-length` as sent, for a body that is not aws-chunked. */
  contentLength: number | undefined;
}
