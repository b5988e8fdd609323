import { HeadBucketCommand } from '@aws-sdk/client-s3';
import type { ObjectStore } from '../object-store.ts';
import { call, connectBucket, type S3StoreOptions } from './bucket.ts';
import { multipartUploads } from './multipart.ts';
import { singleObjects } from './objects.ts';
import { presignedUrls } from './presigned-urls.ts';

/**
 * The S3 backend (AWS S3 and compatible stores: R2, MinIO, Ceph radosgw). Clients move bytes
 * straight to the bucket through URLs presigned with SigV4; Coffer only signs, seals and reads.
 * How an upload URL stays write-once: see presigned-urls.ts.
 */

export function createS3Store(options: S3StoreOptions): ObjectStore {
  const bucket = connectBucket(options);
  const { client, Bucket } = bucket;
  // One object, which its parts fill in: they call one another through it, as any caller does.
  const store = {} as ObjectStore;
  return Object.assign(store, {
    kind: 's3',
    capabilities: { servesUrls: false, sha256OnUpload: false, partSizeRequired: true },
    ...presignedUrls(bucket, store),
    ...singleObjects(bucket, store),
    ...multipartUploads(bucket, store),

    async check() {
      await call('check bucket', () => client.send(new HeadBucketCommand({ Bucket })));
    },

    async close() {
      client.destroy();
    },
  } satisfies ObjectStore);
}
