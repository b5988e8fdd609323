import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import {
  assertKey,
  checkPartNumber,
  isKey,
  type ObjectStore,
  type PartInfo,
  StoreError,
} from '../object-store.ts';
import { checkSize, exactly } from './bodies.ts';
import { call, type S3Bucket, toStoreError } from './bucket.ts';

/**
 * The multipart uploads of the S3 store, which are the bucket's own: started, given parts written
 * by Coffer, listed, completed or aborted, and swept once stale. The bucket's open uploads are found
 * by key here for the rest of the store too (an upload URL is one, see presigned-urls.ts).
 */

/** The multipart uploads still open under `prefix` (the whole bucket without one), page by page. */
async function* openUploads({ client, Bucket }: S3Bucket, prefix?: string) {
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
export async function uploadsOf(bucket: S3Bucket, key: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const upload of openUploads(bucket, key))
    if (upload.Key === key && upload.UploadId) ids.push(upload.UploadId);
  return ids;
}

export function multipartUploads(
  bucket: S3Bucket,
  store: ObjectStore,
): Pick<
  ObjectStore,
  | 'createMultipart'
  | 'stagePart'
  | 'writePart'
  | 'listParts'
  | 'completeMultipart'
  | 'abortMultipart'
  | 'removeStale'
> {
  const { client, Bucket } = bucket;
  return {
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
      for (const id of await uploadsOf(bucket, key)) await store.abortMultipart(key, id);
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
      for await (const { Key, UploadId, Initiated } of openUploads(bucket)) {
        if (!isKey(Key) || !UploadId || !Initiated || Initiated >= olderThan || (await keep(Key))) continue;
        await store.abortMultipart(Key, UploadId);
        removed++;
      }
      return removed;
    },
  };
}
