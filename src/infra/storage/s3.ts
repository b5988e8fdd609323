import { createHash } from 'node:crypto';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { pipeline, type Readable, Transform } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { create as contentDisposition } from 'content-disposition';
import {
  assertKey,
  type ByteRange,
  checkPartNumber,
  checkWriteSize,
  isKey,
  isStoreError,
  MAX_PART_SIZE,
  type ObjectInfo,
  type ObjectPart,
  type ObjectStore,
  type PartInfo,
  StoreError,
  type StoreErrorCode,
} from './object-store.ts';

/**
 * The S3 backend (AWS S3 and compatible stores: R2, MinIO, Ceph radosgw). Clients move bytes
 * straight to the bucket through URLs presigned with SigV4; Coffer only signs, seals and reads.
 *
 * Write-once without conditional writes: an upload URL is a presigned UploadPart of a one-part
 * multipart upload, so the bytes become an object only when Coffer completes that upload (seal),
 * after which the URL answers NoSuchUpload; no URL is ever issued for the object's own key. The
 * part URL signs Content-Length and Content-Type, so a browser sends exactly what it declared
 * (an empty object too: a part of zero bytes may be the only one).
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

/** SigV4 presigned URLs live at most a week. */
const MAX_URL_SECONDS = 604_800;

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

function toStoreError(error: unknown, what: string): StoreError {
  if (error instanceof StoreError) return error;
  const name = (error as { name?: string } | undefined)?.name ?? '';
  const code = error instanceof S3ServiceException ? CODE_OF[name] : undefined;
  if (code) return new StoreError(code, `${what}: ${name}`, undefined, { cause: error });
  // Network failures, timeouts, 5xx, and a misconfigured bucket or credentials: the store cannot serve.
  return new StoreError('Unavailable', `${what}: the object store failed (${name || 'error'})`, undefined, {
    cause: error,
  });
}

/**
 * Signing options for a URL valid until `expiresAt`, never less: SigV4 counts the lifetime from
 * X-Amz-Date, which has whole seconds, so the signing date is the current second, taken down.
 */
function lifetime(expiresAt: Date): { signingDate: Date; expiresIn: number } {
  const signingDate = new Date(Math.floor(Date.now() / 1000) * 1000);
  const expiresIn = Math.ceil((expiresAt.getTime() - signingDate.getTime()) / 1000);
  if (!Number.isFinite(expiresIn) || expiresIn < 1 || expiresIn > MAX_URL_SECONDS) {
    throw new StoreError('InvalidArgument', `URL lifetimes run from 1 to ${MAX_URL_SECONDS} seconds`);
  }
  return { signingDate, expiresIn };
}

/** The bytes a Content-Range header (`bytes first-last/size`) names; undefined without one. */
function rangeOfHeader(header: string | undefined): ByteRange | undefined {
  const match = header ? /^bytes (\d+)-(\d+)\//.exec(header) : null;
  return match ? { start: Number(match[1]), end: Number(match[2]) } : undefined;
}

function checkSize(size: number, field: string): void {
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
function exactly(body: Readable, size: number) {
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

export function createS3Store(options: S3StoreOptions): ObjectStore {
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
    requestHandler: new NodeHttpHandler({
      connectionTimeout: timeoutMs,
      requestTimeout: timeoutMs,
      throwOnRequestTimeout: true,
      socketTimeout: timeoutMs,
      httpAgent: new HttpAgent(agent),
      httpsAgent: new HttpsAgent(agent),
    }),
  });

  async function call<T>(what: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw toStoreError(error, what);
    }
  }

  /** The multipart uploads still open under `prefix` (the whole bucket without one), page by page. */
  async function* openUploads(prefix?: string) {
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    do {
      const page = await call('list uploads', () =>
        client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: prefix, KeyMarker, UploadIdMarker })),
      );
      yield* page.Uploads ?? [];
      KeyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      UploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (KeyMarker);
  }

  /** Every multipart upload still open for exactly `key` (there is one, unless a create was retried). */
  async function uploadsOf(key: string): Promise<string[]> {
    const ids: string[] = [];
    for await (const upload of openUploads(key))
      if (upload.Key === key && upload.UploadId) ids.push(upload.UploadId);
    return ids;
  }

  const store: ObjectStore = {
    kind: 's3',
    capabilities: { servesUrls: false, sha256OnUpload: false, partSizeRequired: true },

    async presignUpload(key, { size, contentType, expiresAt }) {
      assertKey(key);
      checkSize(size, 'size_bytes');
      const signed = { ...lifetime(expiresAt), signableHeaders: new Set(['content-type']) };
      const { UploadId } = await call('start upload', () =>
        client.send(new CreateMultipartUploadCommand({ Bucket, Key: key, ContentType: contentType })),
      );
      const part = new UploadPartCommand({ Bucket, Key: key, UploadId, PartNumber: 1, ContentLength: size });
      // UploadPart has no Content-Type field: set the header so that it is signed, and the browser
      // cannot send other bytes than the type it declared.
      part.middlewareStack.add(
        (next) => async (args) => {
          (args.request as { headers: Record<string, string> }).headers['content-type'] = contentType;
          return next(args);
        },
        { step: 'build', name: 'cofferSignedContentType' },
      );
      return call('presign upload', () => getSignedUrl(client, part, signed));
    },

    async seal(key) {
      assertKey(key);
      // Usually one upload (its URL's), or none once sealed: list, ListParts, Complete.
      const uploads = await uploadsOf(key);
      for (const id of uploads) {
        const [part] = await store.listParts(key, id).catch((error) => {
          if (isStoreError(error, 'NoSuchUpload')) return [];
          throw error;
        });
        if (part?.partNumber !== 1) continue;
        try {
          const done = await call('seal upload', () =>
            client.send(
              new CompleteMultipartUploadCommand({
                Bucket,
                Key: key,
                UploadId: id,
                MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.etag }] },
              }),
            ),
          );
          // A start the SDK retried may have left another, empty upload of the key.
          for (const other of uploads) if (other !== id) await store.abortMultipart(key, other);
          // radosgw answers an empty ETag on complete: then the object's own.
          return done.ETag ? { size: part.size, etag: done.ETag } : store.head(key);
        } catch (error) {
          // Sealed by a concurrent call meanwhile: what stands is the object.
          const sealed = await store.head(key);
          if (sealed) return sealed;
          throw error;
        }
      }
      return store.head(key);
    },

    async write(key, body, { size, contentType }) {
      assertKey(key);
      checkWriteSize(size);
      const counted = exactly(body, size);
      try {
        const put = await call('write', () =>
          client.send(
            new PutObjectCommand({
              Bucket,
              Key: key,
              Body: counted.stream,
              ContentLength: size,
              ContentType: contentType,
            }),
            { abortSignal: counted.failed },
          ),
        );
        return { size, etag: put.ETag ?? '""', sha256: counted.sha256() };
      } catch (error) {
        throw counted.blame(error);
      }
    },

    async presignGet(key, { expiresAt, filename, contentType }) {
      assertKey(key);
      return call('presign download', () =>
        getSignedUrl(
          client,
          new GetObjectCommand({
            Bucket,
            Key: key,
            ResponseContentDisposition: contentDisposition(filename),
            ResponseContentType: contentType,
          }),
          lifetime(expiresAt),
        ),
      );
    },

    async head(key) {
      assertKey(key);
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket, Key: key }));
        return { size: head.ContentLength ?? 0, etag: head.ETag ?? '""' } satisfies ObjectInfo;
      } catch (error) {
        const mapped = toStoreError(error, 'head');
        if (mapped.code === 'NoSuchKey') return undefined;
        throw mapped;
      }
    },

    /**
     * The store's own HeadObject of the part, a ranged HEAD: its Content-Range places the part. A store
     * that answers without one and without a parts count (an empty object, or a store that ignores
     * partNumber) showed the whole object, which is then its one part.
     */
    async headPart(key, partNumber): Promise<ObjectPart | undefined> {
      assertKey(key);
      checkPartNumber(partNumber);
      let head: HeadObjectCommandOutput;
      try {
        head = await client.send(new HeadObjectCommand({ Bucket, Key: key, PartNumber: partNumber }));
      } catch (error) {
        // A HEAD's refusal has no body to name it: a part past the last is its status, 416.
        if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 416) {
          throw new StoreError('InvalidRange', `The object has no part ${partNumber}`, undefined, {
            cause: error,
          });
        }
        const mapped = toStoreError(error, 'head part');
        if (mapped.code === 'NoSuchKey') return undefined;
        throw mapped;
      }
      const range = rangeOfHeader(head.ContentRange);
      if (range) return { range, partsCount: head.PartsCount };
      const size = head.ContentLength ?? 0;
      if (head.PartsCount !== undefined) {
        // Parts counted but not placed (some servers leave Content-Range out): the part starts where
        // the ones before it end.
        let start = 0;
        for (let before = 1; before < partNumber; before++) {
          const earlier = await client.send(new HeadObjectCommand({ Bucket, Key: key, PartNumber: before }));
          start += earlier.ContentLength ?? 0;
        }
        return {
          range: size > 0 ? { start, end: start + size - 1 } : undefined,
          partsCount: head.PartsCount,
        };
      }
      if (partNumber > 1) {
        throw new StoreError('InvalidRange', `The object has no part ${partNumber}`, { parts_count: 1 });
      }
      return { range: size > 0 ? { start: 0, end: size - 1 } : undefined, partsCount: undefined };
    },

    async read(key, range?: ByteRange): Promise<Readable> {
      assertKey(key);
      if (
        range &&
        !(Number.isSafeInteger(range.start) && Number.isSafeInteger(range.end) && range.start >= 0)
      ) {
        throw new StoreError('InvalidArgument', 'Invalid byte range');
      }
      if (range && range.end < range.start) throw new StoreError('InvalidArgument', 'Invalid byte range');
      const object = await call('read', () =>
        client.send(
          new GetObjectCommand({
            Bucket,
            Key: key,
            Range: range ? `bytes=${range.start}-${range.end}` : undefined,
          }),
        ),
      );
      return object.Body as Readable;
    },

    async delete(key) {
      assertKey(key);
      for (const id of await uploadsOf(key)) await store.abortMultipart(key, id);
      await call('delete', () => client.send(new DeleteObjectCommand({ Bucket, Key: key })));
    },

    async createMultipart(key, { contentType, totalSize }) {
      assertKey(key);
      if (!Number.isSafeInteger(totalSize) || totalSize < 0) {
        throw new StoreError('InvalidArgument', 'Invalid total size', { field: 'total_size_bytes' });
      }
      const { UploadId } = await call('start multipart upload', () =>
        client.send(new CreateMultipartUploadCommand({ Bucket, Key: key, ContentType: contentType })),
      );
      if (!UploadId) throw new StoreError('Unavailable', 'The object store gave no upload id');
      return UploadId;
    },

    async presignPart(key, uploadId, partNumber, { expiresAt, size }) {
      assertKey(key);
      checkPartNumber(partNumber);
      if (size === undefined) {
        throw new StoreError(
          'InvalidArgument',
          'size is required: part URLs are signed for the exact part size',
          {
            field: 'size',
          },
        );
      }
      checkSize(size, 'size');
      return call('presign part', () =>
        getSignedUrl(
          client,
          new UploadPartCommand({
            Bucket,
            Key: key,
            UploadId: uploadId,
            PartNumber: partNumber,
            ContentLength: size,
          }),
          lifetime(expiresAt),
        ),
      );
    },

    // S3 takes a part's number with its bytes: they are sent once it is known.
    stagePart(key, uploadId, body, size) {
      return {
        place: (partNumber) => store.writePart(key, uploadId, partNumber, body, size),
        discard: async () => undefined,
      };
    },

    async writePart(key, uploadId, partNumber, body, size) {
      assertKey(key);
      checkPartNumber(partNumber);
      checkSize(size, 'size');
      const counted = exactly(body, size);
      try {
        const part = await call('write part', () =>
          client.send(
            new UploadPartCommand({
              Bucket,
              Key: key,
              UploadId: uploadId,
              PartNumber: partNumber,
              Body: counted.stream,
              ContentLength: size,
            }),
            { abortSignal: counted.failed },
          ),
        );
        return part.ETag ?? '""';
      } catch (error) {
        throw counted.blame(error);
      }
    },

    async listParts(key, uploadId) {
      assertKey(key);
      const parts: PartInfo[] = [];
      let PartNumberMarker: string | undefined;
      do {
        const page = await call('list parts', () =>
          client.send(new ListPartsCommand({ Bucket, Key: key, UploadId: uploadId, PartNumberMarker })),
        ).catch((error: StoreError) => {
          // radosgw answers NoSuchKey for an upload that was aborted.
          throw error.code === 'NoSuchKey' ? new StoreError('NoSuchUpload', 'Upload not found') : error;
        });
        for (const part of page.Parts ?? []) {
          parts.push({ partNumber: part.PartNumber!, etag: part.ETag!, size: part.Size! });
        }
        PartNumberMarker = page.IsTruncated ? page.NextPartNumberMarker : undefined;
      } while (PartNumberMarker);
      return parts;
    },

    async completeMultipart(key, uploadId, parts) {
      assertKey(key);
      if (parts.length === 0)
        throw new StoreError('InvalidPart', 'A multipart upload needs at least one part');
      if (await store.head(key))
        throw new StoreError('AlreadyExists', 'The object has already been uploaded', { key });
      await call('complete multipart upload', () =>
        client.send(
          new CompleteMultipartUploadCommand({
            Bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: {
              Parts: parts.map(({ partNumber, etag }) => ({ PartNumber: partNumber, ETag: etag })),
            },
          }),
        ),
      );
      // radosgw answers an empty ETag on complete; the object's own is authoritative anyway.
      const info = await store.head(key);
      if (!info) throw new StoreError('Unavailable', 'The assembled object is not visible yet');
      // A start the SDK retried may have left another, empty upload of the key.
      for (const id of await uploadsOf(key)) await store.abortMultipart(key, id);
      return info;
    },

    async abortMultipart(key, uploadId) {
      assertKey(key);
      try {
        await client.send(new AbortMultipartUploadCommand({ Bucket, Key: key, UploadId: uploadId }));
      } catch (error) {
        const mapped = toStoreError(error, 'abort multipart upload');
        if (mapped.code !== 'NoSuchUpload' && mapped.code !== 'NoSuchKey') throw mapped;
      }
    },

    /**
     * Incomplete multipart uploads (upload URLs never sealed, multipart sessions) initiated before
     * `olderThan`; keys of another shape are not Coffer's and stay.
     */
    async removeStale(olderThan, keep) {
      let removed = 0;
      for await (const { Key, UploadId, Initiated } of openUploads()) {
        if (!isKey(Key) || !UploadId || !Initiated || Initiated >= olderThan || (await keep(Key))) continue;
        await store.abortMultipart(Key, UploadId);
        removed++;
      }
      return removed;
    },

    async check() {
      await call('check bucket', () => client.send(new HeadBucketCommand({ Bucket })));
    },

    async close() {
      client.destroy();
    },
  };
  return store;
}
