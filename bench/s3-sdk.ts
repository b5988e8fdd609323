/** The SDK side of the S3 benchmark: the same transfers, and the S3 calls Coffer makes, sent straight from the AWS SDK. */
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { pool } from './measure.ts';
import { CONTENT_TYPE, putBytes, SIGNED, seconds } from './s3-http.ts';
import type { Plan } from './s3-server.ts';

export async function sdkUpload(client: S3Client, bucket: string, key: string, body: Buffer) {
  const t0 = performance.now();
  const url = await getSignedUrl(
    client,
    new PutObjectCommand({ Bucket: bucket, Key: key, ContentType: CONTENT_TYPE, ContentLength: body.length }),
    SIGNED,
  );
  const t1 = performance.now();
  await putBytes(url, body, CONTENT_TYPE);
  const t2 = performance.now();
  return { presign: seconds(t0, t1), put: seconds(t1, t2), whole: seconds(t0, t2) };
}

export async function sdkGetUrl(client: S3Client, bucket: string, key: string): Promise<string> {
  return getSignedUrl(client, new GetObjectCommand({ Bucket: bucket, Key: key }), { expiresIn: 3600 });
}

export async function sdkMultipart(client: S3Client, bucket: string, key: string, data: Buffer, p: Plan) {
  const t0 = performance.now();
  const { UploadId } = await client.send(
    new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: CONTENT_TYPE }),
  );
  const t1 = performance.now();
  const etags: string[] = [];
  await pool(p.parts.length, p.inFlight, async (i) => {
    const [offset, length] = p.parts[i]!;
    const url = await getSignedUrl(
      client,
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, ContentLength: length }),
      { expiresIn: 3600 },
    );
    etags[i] = await putBytes(url, data.subarray(offset, offset + length));
  });
  const t2 = performance.now();
  await client.send(
    new CompleteMultipartUploadCommand({
      Bucket: bucket,
      Key: key,
      UploadId,
      MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) },
    }),
  );
  const t3 = performance.now();
  return {
    start: seconds(t0, t1),
    parts: seconds(t1, t2),
    complete: seconds(t2, t3),
    whole: seconds(t0, t3),
  };
}

async function headMissing(client: S3Client, bucket: string, key: string): Promise<void> {
  try {
    await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
  } catch (error) {
    if ((error as { name?: string }).name !== 'NotFound') throw error;
  }
}

/**
 * The S3 calls of Coffer's initiate and confirm on a small object, straight from the SDK: initiate
 * creates a multipart upload and presigns its part 1; confirm's seal is HEAD (no object yet), list the
 * key's uploads, list the parts, complete, HEAD the object, list the key's uploads again.
 */
/** The S3 calls of confirm's seal, in order, by their names in the report. */
export const SEAL_CALLS = [
  'HEAD',
  'list uploads',
  'ListParts',
  'Complete',
  'HEAD ',
  'list uploads ',
] as const;
export type SealCalls = Record<(typeof SEAL_CALLS)[number], number>;

export async function sdkSealedUpload(client: S3Client, bucket: string, key: string, body: Buffer) {
  const Bucket = bucket;
  const Key = key;
  const t0 = performance.now();
  const { UploadId } = await client.send(
    new CreateMultipartUploadCommand({ Bucket, Key, ContentType: CONTENT_TYPE }),
  );
  const url = await getSignedUrl(
    client,
    new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, ContentLength: body.length }),
    { expiresIn: 3600 },
  );
  const t1 = performance.now();
  await putBytes(url, body);
  const t2 = performance.now();
  let etag: string | undefined;
  const steps: (() => Promise<unknown>)[] = [
    () => headMissing(client, Bucket, Key),
    () => client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: Key })),
    async () => {
      etag = (await client.send(new ListPartsCommand({ Bucket, Key, UploadId }))).Parts?.[0]?.ETag;
    },
    () =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key,
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: etag }] },
        }),
      ),
    () => client.send(new HeadObjectCommand({ Bucket, Key })),
    () => client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: Key })),
  ];
  const calls = {} as SealCalls;
  for (const [i, step] of steps.entries()) {
    const start = performance.now();
    await step();
    calls[SEAL_CALLS[i]!] = seconds(start);
  }
  const t3 = performance.now();
  return { initiate: seconds(t0, t1), put: seconds(t1, t2), confirm: seconds(t2, t3), calls };
}
