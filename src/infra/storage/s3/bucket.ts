import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { StoreError, type StoreErrorCode } from '../object-store.ts';

/**
 * The bucket of the S3 store: the client that reaches it, shared by every part of the store, and
 * what the bucket's failures mean to Coffer (StoreErrors).
 */

export interface S3StoreOptions {
  bucket: string;
  endpoint?: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
  /** Per attempt: deadline for connecting and for a response's headers (a slow store answers 503, never hangs). */
  timeoutMs: number;
}

/** The store's answers that mean a caller's mistake, by S3 error name; everything else is Unavailable. */
const CODE_OF: Record<string, StoreErrorCode> = {
  NoSuchKey: 'NoSuchKey',
  NotFound: 'NoSuchKey',
  NoSuchUpload: 'NoSuchUpload',
  InvalidPart: 'InvalidPart',
  InvalidPartOrder: 'InvalidPart',
  EntityTooSmall: 'InvalidPart',
  EntityTooLarge: 'TooLarge',
  InvalidRange: 'InvalidRange',
};

export function toStoreError(error: unknown, what: string): StoreError {
  if (error instanceof StoreError) return error;
  const name = (error as { name?: string } | undefined)?.name ?? '';
  const code = error instanceof S3ServiceException ? CODE_OF[name] : undefined;
  if (code) return new StoreError(code, `${what}: ${name}`, undefined, { cause: error });
  // Network failures, timeouts, 5xx, and a misconfigured bucket or credentials: the store cannot serve.
  return new StoreError('Unavailable', `${what}: the object store failed (${name || 'error'})`, undefined, {
    cause: error,
  });
}

/** Runs one request to the bucket; whatever it throws becomes a StoreError (see toStoreError). */
export async function call<T>(what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw toStoreError(error, what);
  }
}

/** The bucket and the client that reaches it. */
export interface S3Bucket {
  client: S3Client;
  Bucket: string;
}

export function connectBucket(options: S3StoreOptions): S3Bucket {
  const Bucket = options.bucket;
  const { timeoutMs } = options;
  const agent = { keepAlive: true, maxSockets: 256 };
  const client = new S3Client({
    region: options.region,
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    credentials:
      options.accessKeyId && options.secretAccessKey
        ? { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey }
        : undefined, // the SDK's default chain: environment, shared files, instance roles
    // Checksums only where S3 requires them: stores that predate the newer defaults (radosgw 16,
    // older MinIO) refuse aws-chunked bodies, and presigned URLs would carry a checksum of no body.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // Retries of throttling, 5xx, timeouts and network errors: every call Coffer makes may be repeated
    // (a create that was retried leaves an upload that seal and delete find by its key).
    maxAttempts: 3,
    // A store that does not connect, or is silent (nothing sent or received) for `timeoutMs`, fails the
    // attempt. No deadline on the whole request: a body streamed from a slow client takes as long as
    // its client does, and the store is not silent while it arrives.
    requestHandler: new NodeHttpHandler({
      connectionTimeout: timeoutMs,
      socketTimeout: timeoutMs,
      httpAgent: new HttpAgent(agent),
      httpsAgent: new HttpsAgent(agent),
    }),
  });
  return { client, Bucket };
}
