import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import {
  assertKey,
  type ByteRange,
  checkPartNumber,
  checkWriteSize,
  type ObjectInfo,
  type ObjectPart,
  type ObjectStore,
  StoreError,
} from '../object-store.ts';
import { exactly } from './bodies.ts';
import { call, type S3Bucket, toStoreError } from './bucket.ts';
import { uploadsOf } from './multipart.ts';

/** The objects of the S3 store, one at a time: written whole by Coffer, headed, read and deleted. */

/** The bytes a Content-Range header (`bytes first-last/size`) names; undefined without one. */
function rangeOfHeader(header: string | undefined): ByteRange | undefined {
  const match = header ? /^bytes (\d+)-(\d+)\//.exec(header) : null;
  return match ? { start: Number(match[1]), end: Number(match[2]) } : undefined;
}

export function singleObjects(
  bucket: S3Bucket,
  store: ObjectStore,
): Pick<ObjectStore, 'write' | 'head' | 'headPart' | 'read' | 'delete'> {
  const { client, Bucket } = bucket;
  return {
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
      for (const id of await uploadsOf(bucket, key)) await store.abortMultipart(key, id);
      await call('delete', () => client.send(new DeleteObjectCommand({ Bucket, Key: key })));
    },
  };
}
