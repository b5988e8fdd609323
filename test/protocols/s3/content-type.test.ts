import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import type { TestProject } from '../../support/coffer.ts';
import { type Bucket, s3EndpointSuite } from '../../support/s3-endpoint.ts';

// The Content-Type of an object, as S3 keeps it: the value its write sent, parameters and case
// included, answered by GetObject and HeadObject, copied with the object, kept by each version. The
// file's `content_type` in the REST API stays the bare type Coffer's rules read.
const { bucketWith } = s3EndpointSuite();

/** The Content-Type GetObject and HeadObject answer for `Key` (or its version), which must agree. */
async function typeOf(
  { client, name }: Bucket,
  Key: string,
  VersionId?: string,
): Promise<string | undefined> {
  const got = await client.send(new GetObjectCommand({ Bucket: name, Key, VersionId }));
  await got.Body?.transformToByteArray();
  const head = await client.send(new HeadObjectCommand({ Bucket: name, Key, VersionId }));
  expect(head.ContentType, `HeadObject of ${Key}`).toBe(got.ContentType);
  return got.ContentType;
}

/** The `content_type` the REST API shows for the file named `filename`. */
async function restTypeOf(project: TestProject, filename: string): Promise<string> {
  const [file] = (await project.call('GET', `/files?q=${encodeURIComponent(filename)}`)).body.items;
  return file.content_type;
}

describe('the Content-Type of an object written through S3', () => {
  it('is answered as PutObject sent it, parameters and case included; the file keeps the bare type', async () => {
    const bucket = await bucketWith();
    const { client, name, project } = bucket;
    const sent = {
      'charset.txt': 'text/plain; charset=utf-8',
      'cased.txt': 'Text/Plain',
      'both.csv': 'text/csv;charset=UTF-8;header=present',
      'bare.txt': 'text/plain',
    };
    for (const [Key, ContentType] of Object.entries(sent)) {
      await client.send(new PutObjectCommand({ Bucket: name, Key, Body: 'a,b\n', ContentType }));
    }
    for (const [Key, ContentType] of Object.entries(sent)) {
      expect(await typeOf(bucket, Key), Key).toBe(ContentType);
    }
    expect(await restTypeOf(project, 'charset.txt')).toBe('text/plain');
    expect(await restTypeOf(project, 'cased.txt')).toBe('text/plain');
    expect(await restTypeOf(project, 'both.csv')).toBe('text/csv');
    // A presigned GET's response-content-type still wins over it.
    const url = await getSignedUrl(
      client,
      new GetObjectCommand({ Bucket: name, Key: 'charset.txt', ResponseContentType: 'application/json' }),
    );
    const got = await fetch(url);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('application/json');
    // New content sent with the bare type answers it, not the type of the content before.
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'charset.txt', Body: 'x', ContentType: 'text/plain' }),
    );
    expect(await typeOf(bucket, 'charset.txt')).toBe('text/plain');
  });

  it('is copied with the object: COPY takes the source’s, REPLACE the one it sends or, sending none, the source’s', async () => {
    const bucket = await bucketWith();
    const { client, name, project } = bucket;
    await client.send(
      new PutObjectCommand({
        Bucket: name,
        Key: 'source.txt',
        Body: 'source',
        ContentType: 'text/plain; charset=iso-8859-1',
      }),
    );
    await client.send(
      new CopyObjectCommand({ Bucket: name, Key: 'copied.txt', CopySource: `${name}/source.txt` }),
    );
    expect(await typeOf(bucket, 'copied.txt')).toBe('text/plain; charset=iso-8859-1');
    await client.send(
      new CopyObjectCommand({
        Bucket: name,
        Key: 'retyped.txt',
        CopySource: `${name}/source.txt`,
        MetadataDirective: 'REPLACE',
        ContentType: 'text/plain; charset=utf-8',
      }),
    );
    expect(await typeOf(bucket, 'retyped.txt')).toBe('text/plain; charset=utf-8');
    await client.send(
      new CopyObjectCommand({
        Bucket: name,
        Key: 'kept.txt',
        CopySource: `${name}/source.txt`,
        MetadataDirective: 'REPLACE',
      }),
    );
    expect(await typeOf(bucket, 'kept.txt')).toBe('text/plain; charset=iso-8859-1');
    expect(await restTypeOf(project, 'retyped.txt')).toBe('text/plain');
  });

  it('is kept by each version, and copied from the version named', async () => {
    const bucket = await bucketWith({ versioning_enabled: true });
    const { client, name } = bucket;
    const first = await client.send(
      new PutObjectCommand({
        Bucket: name,
        Key: 'doc.txt',
        Body: 'v1',
        ContentType: 'text/plain; charset=utf-8',
      }),
    );
    const second = await client.send(
      new PutObjectCommand({
        Bucket: name,
        Key: 'doc.txt',
        Body: 'v2',
        ContentType: 'text/plain; format=flowed',
      }),
    );
    expect(first.VersionId).toBeTruthy();
    expect(await typeOf(bucket, 'doc.txt')).toBe('text/plain; format=flowed');
    expect(await typeOf(bucket, 'doc.txt', first.VersionId)).toBe('text/plain; charset=utf-8');
    expect(await typeOf(bucket, 'doc.txt', second.VersionId)).toBe('text/plain; format=flowed');
    await client.send(
      new CopyObjectCommand({
        Bucket: name,
        Key: 'restored.txt',
        CopySource: `${name}/doc.txt?versionId=${first.VersionId}`,
      }),
    );
    expect(await typeOf(bucket, 'restored.txt')).toBe('text/plain; charset=utf-8');
  });

  it('is the one CreateMultipartUpload sent, for a new key and for new content of one', async () => {
    const bucket = await bucketWith();
    const { client, name, project } = bucket;
    const multipart = async (Key: string, ContentType: string) => {
      const { UploadId } = await client.send(
        new CreateMultipartUploadCommand({ Bucket: name, Key, ContentType }),
      );
      const part = await client.send(
        new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: 'a,b\n1,2\n' }),
      );
      await client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key,
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
        }),
      );
    };
    await multipart('table.csv', 'text/csv; charset=utf-8; header=present');
    expect(await typeOf(bucket, 'table.csv')).toBe('text/csv; charset=utf-8; header=present');
    expect(await restTypeOf(project, 'table.csv')).toBe('text/csv');
    // Over the key, the upload makes new content of its file, with its own type as sent.
    await multipart('table.csv', 'text/csv; header=absent');
    expect(await typeOf(bucket, 'table.csv')).toBe('text/csv; header=absent');
  });
});
