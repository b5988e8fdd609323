import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { beforeAll, describe, expect, it } from 'vitest';
import { refusalWithMessage as refusal, s3EndpointSuite } from '../../support/s3-endpoint.ts';

// Coffer's bucket is as an S3 bucket whose ACLs are disabled (Object Ownership "bucket owner
// enforced") and that keeps every object in the STANDARD class: writes asking otherwise are refused.
const { bucketWith } = s3EndpointSuite();
let client: S3Client;
let name: string;
/** The bucket owner's canonical id, as ListBuckets names it. */
let owner: string;
beforeAll(async () => {
  ({ client, name } = await bucketWith());
  owner = (await client.send(new ListBucketsCommand({}))).Owner!.ID!;
  await client.send(new PutObjectCommand({ Bucket: name, Key: 'source.txt', Body: 'source' }));
});

/** PutObject, CopyObject and CreateMultipartUpload (aborted again) of `Key`, each with `ask`. */
const writes = (Key: string, ask: object) => [
  () => client.send(new PutObjectCommand({ Bucket: name, Key, Body: 'bytes', ...ask })),
  () => client.send(new CopyObjectCommand({ Bucket: name, Key, CopySource: `${name}/source.txt`, ...ask })),
  async () => {
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key, ...ask }));
    await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key, UploadId }));
  },
];

/** Asserts that nothing was stored at `Key` and no multipart upload is open under `prefix`. */
async function expectNothingAt(Key: string, prefix: string) {
  expect(await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key })))).toMatchObject({
    status: 404,
  });
  const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: name, Prefix: prefix }));
  expect(uploads.Uploads ?? []).toEqual([]);
}

describe('ACLs, as a bucket whose ACLs are disabled', () => {
  it('takes a write with no ACL, or one granting the bucket owner full control alone', async () => {
    const asks = [
      {},
      { ACL: 'bucket-owner-full-control' as const },
      { ACL: 'private' as const },
      // The grant form of bucket-owner-full-control, quoted or not.
      { GrantFullControl: `id="${owner}"` },
      { GrantFullControl: `id=${owner}` },
    ];
    for (const [index, ask] of asks.entries()) {
      for (const write of writes(`acl-ok/${index}.txt`, ask)) await write();
      await client.send(new HeadObjectCommand({ Bucket: name, Key: `acl-ok/${index}.txt` }));
    }
  });

  it('refuses any other canned ACL or any grant with 400 AccessControlListNotSupported, storing nothing', async () => {
    const asks = [
      { ACL: 'public-read' as const },
      { ACL: 'public-read-write' as const },
      { ACL: 'authenticated-read' as const },
      { ACL: 'aws-exec-read' as const },
      { ACL: 'bucket-owner-read' as const },
      { GrantRead: 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' },
      { GrantFullControl: 'id=someone' },
      { GrantFullControl: `id="${owner}", id="someone"` },
      { GrantFullControl: `emailAddress="${owner}"` },
      { GrantRead: `id="${owner}"` },
      { GrantReadACP: 'id=someone' },
      { GrantWriteACP: 'id=someone' },
    ];
    for (const [index, ask] of asks.entries()) {
      const Key = `acl-refused/${index}.txt`;
      for (const write of writes(Key, ask)) {
        expect(await refusal(write())).toEqual({
          code: 'AccessControlListNotSupported',
          status: 400,
          message: 'The bucket does not allow ACLs',
        });
      }
      await expectNothingAt(Key, 'acl-refused/');
    }
  });
});

describe('storage classes, as a bucket offering STANDARD alone', () => {
  it('takes a write naming no class or STANDARD', async () => {
    for (const [index, ask] of [{}, { StorageClass: 'STANDARD' as const }].entries()) {
      for (const write of writes(`class-ok/${index}.txt`, ask)) await write();
      await client.send(new HeadObjectCommand({ Bucket: name, Key: `class-ok/${index}.txt` }));
    }
  });

  it('refuses any other class with 400 InvalidStorageClass, storing nothing', async () => {
    const classes = ['REDUCED_REDUNDANCY', 'STANDARD_IA', 'GLACIER', 'DEEP_ARCHIVE', 'NO_SUCH_CLASS'];
    for (const [index, StorageClass] of classes.entries()) {
      const Key = `class-refused/${index}.txt`;
      for (const write of writes(Key, { StorageClass })) {
        expect(await refusal(write())).toEqual({
          code: 'InvalidStorageClass',
          status: 400,
          message: 'The storage class you specified is not valid.',
        });
      }
      await expectNothingAt(Key, 'class-refused/');
    }
  });
});

describe('a presigned PUT', () => {
  it('refuses an ACL or a class it carries in its query, storing nothing', async () => {
    const asks = [
      { ask: { ACL: 'public-read' as const }, parameter: 'x-amz-acl', code: 'AccessControlListNotSupported' },
      {
        ask: { StorageClass: 'GLACIER' as const },
        parameter: 'x-amz-storage-class',
        code: 'InvalidStorageClass',
      },
    ];
    for (const [index, { ask, parameter, code }] of asks.entries()) {
      const Key = `presigned-${index}.txt`;
      const url = await getSignedUrl(client, new PutObjectCommand({ Bucket: name, Key, ...ask }), {
        expiresIn: 60,
      });
      expect(new URL(url).searchParams.has(parameter)).toBe(true);
      const put = await fetch(url, { method: 'PUT', body: 'bytes' });
      expect(put.status).toBe(400);
      expect(await put.text()).toContain(`<Code>${code}</Code>`);
      await expectNothingAt(Key, `presigned-${index}`);
    }
  });
});
