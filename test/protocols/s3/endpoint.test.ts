import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketLocationCommand,
  GetBucketTaggingCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';
import { drain } from '../../support/pipeline.ts';

// The S3 endpoint, as the current AWS SDK for JavaScript talks to it (default checksums: stream bodies
// go aws-chunked with a trailing CRC32); every result is checked through Coffer's own REST API too.
let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const md5 = (data: Buffer | string) => createHash('md5').update(data).digest('hex');

interface Bucket {
  project: TestProject;
  name: string;
  client: S3Client;
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

function clientFor(accessKeyId: string, secretAccessKey: string, sessionToken?: string): S3Client {
  return new S3Client({
    endpoint: `${coffer.url}/s3`,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId, secretAccessKey, sessionToken },
    maxAttempts: 1,
    logger: quiet,
  });
}

/** A new project, its bucket, and a client holding an S3 credential with `scopes`. */
async function bucketWith(
  settings: Record<string, unknown> = {},
  scopes = ['files:read', 'files:upload', 'files:delete'],
): Promise<Bucket> {
  const project = await coffer.newProject(settings);
  const created = await coffer.call('POST', `/v1/projects/${project.id}/s3-credentials`, {
    token: ADMIN_KEY,
    body: { name: 'test', scopes },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const { bucket } = (await project.call('GET', '')).body;
  return {
    project,
    name: bucket,
    client: clientFor(created.body.access_key_id, created.body.secret_access_key),
  };
}

/** The S3 error an SDK call was refused with. */
async function refusal(promise: Promise<unknown>): Promise<{ code: string; status: number | undefined }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException)
      return { code: error.name, status: error.$metadata.httpStatusCode };
    throw error;
  }
  throw new Error('the request was not refused');
}

const text = async (body: unknown) =>
  Buffer.from(await (body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());

describe('the S3 endpoint', () => {
  let bucket: Bucket;
  beforeAll(async () => {
    bucket = await bucketWith();
  });

  it('serves the project as its bucket', async () => {
    const { client, name } = bucket;
    const buckets = await client.send(new ListBucketsCommand({}));
    expect(buckets.Buckets?.map((entry) => entry.Name)).toEqual([name]);
    await client.send(new HeadBucketCommand({ Bucket: name }));
    expect(
      (await client.send(new GetBucketLocationCommand({ Bucket: name }))).LocationConstraint,
    ).toBeFalsy();
    expect((await client.send(new GetBucketVersioningCommand({ Bucket: name }))).Status).toBeUndefined();
  });

  it('stores a streamed PutObject as a Coffer file: folders from the key, metadata, MD5 ETag', async () => {
    const { client, name, project } = bucket;
    const data = randomBytes(1024 * 1024 + 7);
    const put = await client.send(
      new PutObjectCommand({
        Bucket: name,
        Key: 'photos/2026/cat.bin',
        Body: Readable.from([data.subarray(0, 1000), data.subarray(1000)]),
        ContentLength: data.length,
        ContentType: 'application/octet-stream',
        Metadata: { camera: 'pinhole' },
      }),
    );
    expect(put.ETag).toBe(`"${md5(data)}"`);
    const listed = await project.call('GET', '/files?q=cat.bin');
    expect(listed.body.total).toBe(1);
    const file = listed.body.items[0];
    expect(file).toMatchObject({
      filename: 'cat.bin',
      status: 'ready',
      size_bytes: data.length,
      metadata: { camera: 'pinhole' },
      checksum_sha256: createHash('sha256').update(data).digest('hex'),
    });
    const folder = await project.call('GET', `/folders/${file.folder_id}`);
    expect(folder.body.path).toBe('photos/2026');

    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'photos/2026/cat.bin' }));
    expect(got.ETag).toBe(`"${md5(data)}"`);
    expect(got.Metadata).toEqual({ camera: 'pinhole' });
    expect(got.ContentLength).toBe(data.length);
    expect((await text(got.Body)).equals(data)).toBe(true);
  });

  it('reads ranges and answers conditional requests', async () => {
    const { client, name } = bucket;
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'range.txt', Body: '0123456789', ContentType: 'text/plain' }),
    );
    const part = await client.send(
      new GetObjectCommand({ Bucket: name, Key: 'range.txt', Range: 'bytes=2-5' }),
    );
    expect((await text(part.Body)).toString()).toBe('2345');
    expect(part.ContentRange).toBe('bytes 2-5/10');
    const etag = `"${md5('0123456789')}"`;
    expect(
      await refusal(
        client.send(new GetObjectCommand({ Bucket: name, Key: 'range.txt', IfMatch: '"other"' })),
      ),
    ).toMatchObject({ status: 412 });
    expect(
      await refusal(client.send(new GetObjectCommand({ Bucket: name, Key: 'range.txt', IfNoneMatch: etag }))),
    ).toMatchObject({ status: 304 });
    const head = await client.send(new HeadObjectCommand({ Bucket: name, Key: 'range.txt' }));
    expect(head).toMatchObject({ ContentLength: 10, ETag: etag, ContentType: 'text/plain' });
  });

  it('serves presigned GET URLs with response-content-* overrides', async () => {
    const { client, name } = bucket;
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'signed.txt', Body: 'presigned', ContentType: 'text/plain' }),
    );
    const url = await getSignedUrl(
      client,
      new GetObjectCommand({
        Bucket: name,
        Key: 'signed.txt',
        ResponseContentDisposition: 'attachment; filename="x.txt"',
      }),
      { expiresIn: 60 },
    );
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-disposition')).toBe('attachment; filename="x.txt"');
    expect(await response.text()).toBe('presigned');
    const tampered = await fetch(url.replace('signed.txt', 'signed2.txt'));
    expect(tampered.status).toBe(403);
    expect(await tampered.text()).toContain('<Code>SignatureDoesNotMatch</Code>');
  });

  it('lists keys in binary order, rolled up at the delimiter, page by page', async () => {
    const { client, name } = await bucketWith();
    const keys = ['a.txt', 'b/1.txt', 'b/2.txt', 'b/c/3.txt', 'é.txt', 'z.txt'];
    for (const key of keys) {
      await client.send(
        new PutObjectCommand({ Bucket: name, Key: key, Body: key, ContentType: 'text/plain' }),
      );
    }
    const all = await client.send(new ListObjectsV2Command({ Bucket: name }));
    // b/ and b/c/ are folders Coffer made for the keys: as in S3, they are no keys of their own.
    expect(all.Contents?.map((entry) => entry.Key)).toEqual([
      'a.txt',
      'b/1.txt',
      'b/2.txt',
      'b/c/3.txt',
      'z.txt',
      'é.txt',
    ]);
    const rolled = await client.send(new ListObjectsV2Command({ Bucket: name, Delimiter: '/' }));
    expect(rolled.Contents?.map((entry) => entry.Key)).toEqual(['a.txt', 'z.txt', 'é.txt']);
    expect(rolled.CommonPrefixes?.map((entry) => entry.Prefix)).toEqual(['b/']);
    const inside = await client.send(
      new ListObjectsV2Command({ Bucket: name, Prefix: 'b/', Delimiter: '/' }),
    );
    expect(inside.Contents?.map((entry) => entry.Key)).toEqual(['b/1.txt', 'b/2.txt']);
    expect(inside.CommonPrefixes?.map((entry) => entry.Prefix)).toEqual(['b/c/']);

    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: name, MaxKeys: 3, ContinuationToken: token }),
      );
      expect(page.KeyCount).toBeLessThanOrEqual(3);
      seen.push(...(page.Contents ?? []).map((entry) => entry.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    expect(seen).toEqual(all.Contents?.map((entry) => entry.Key));

    const after = await client.send(new ListObjectsV2Command({ Bucket: name, StartAfter: 'b/c/3.txt' }));
    expect(after.Contents?.map((entry) => entry.Key)).toEqual(['z.txt', 'é.txt']);
    const v1 = await client.send(new ListObjectsCommand({ Bucket: name, Delimiter: '/', MaxKeys: 1 }));
    expect(v1.Contents?.map((entry) => entry.Key)).toEqual(['a.txt']);
    expect(v1.IsTruncated).toBe(true);
    const v1next = await client.send(
      new ListObjectsCommand({ Bucket: name, Delimiter: '/', Marker: v1.NextMarker ?? 'a.txt' }),
    );
    expect(v1next.CommonPrefixes?.map((entry) => entry.Prefix)).toEqual(['b/']);
    const encoded = await client.send(
      new ListObjectsV2Command({ Bucket: name, Prefix: 'é', EncodingType: 'url' }),
    );
    // The SDK hands URL-encoded keys on as they came.
    expect(encoded.EncodingType).toBe('url');
    expect(encoded.Contents?.map((entry) => entry.Key)).toEqual(['%C3%A9.txt']);
  });

  it('deletes objects: the file is deleted in Coffer, a missing key is no error', async () => {
    const { client, name, project } = bucket;
    const put = await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'gone.txt', Body: 'bye', ContentType: 'text/plain' }),
    );
    expect(put.ETag).toBeDefined();
    await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'gone.txt' }));
    await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'gone.txt' }));
    expect(await refusal(client.send(new GetObjectCommand({ Bucket: name, Key: 'gone.txt' })))).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });
    expect((await project.call('GET', '/files?q=gone.txt')).body.total).toBe(0);
  });

  it('refuses what a credential may not do, and what it may not see', async () => {
    const readOnly = await bucketWith({}, ['files:read']);
    expect(
      await refusal(
        readOnly.client.send(new PutObjectCommand({ Bucket: readOnly.name, Key: 'x.txt', Body: 'x' })),
      ),
    ).toEqual({ code: 'AccessDenied', status: 403 });
    expect(await refusal(bucket.client.send(new ListObjectsV2Command({ Bucket: readOnly.name })))).toEqual({
      code: 'NoSuchBucket',
      status: 404,
    });
    const wrong = clientFor('CFRNOSUCHKEY00000000', 'x'.repeat(40));
    expect(await refusal(wrong.send(new ListBucketsCommand({})))).toEqual({
      code: 'InvalidAccessKeyId',
      status: 403,
    });
    expect(await refusal(bucket.client.send(new GetBucketTaggingCommand({ Bucket: bucket.name })))).toEqual({
      code: 'NotImplemented',
      status: 501,
    });
  });

  it("keeps Coffer's rules: allowed types, quotas, and scanning before reading", async () => {
    const images = await bucketWith({ allowed_mime_types: 'image/*' });
    expect(
      await refusal(
        images.client.send(
          new PutObjectCommand({ Bucket: images.name, Key: 'a.txt', Body: 'x', ContentType: 'text/plain' }),
        ),
      ),
    ).toEqual({ code: 'AccessDenied', status: 403 });
    const small = await bucketWith({ max_file_size_bytes: 4 });
    expect(
      await refusal(
        small.client.send(
          new PutObjectCommand({
            Bucket: small.name,
            Key: 'a.txt',
            Body: 'too long',
            ContentType: 'text/plain',
          }),
        ),
      ),
    ).toEqual({ code: 'EntityTooLarge', status: 400 });
    const scanned = await bucketWith({ virus_scan_enabled: true });
    await scanned.client.send(
      new PutObjectCommand({
        Bucket: scanned.name,
        Key: 'wait.txt',
        Body: 'wait',
        ContentType: 'text/plain',
      }),
    );
    expect(
      await refusal(scanned.client.send(new GetObjectCommand({ Bucket: scanned.name, Key: 'wait.txt' }))),
    ).toEqual({ code: 'InvalidObjectState', status: 403 });
    await drain(coffer.services.pipeline);
    const got = await scanned.client.send(new GetObjectCommand({ Bucket: scanned.name, Key: 'wait.txt' }));
    expect((await text(got.Body)).toString()).toBe('wait');
  });

  it('a PUT over a key makes a new version where versioning is on, and replaces the content otherwise', async () => {
    const versioned = await bucketWith({ versioning_enabled: true });
    for (const body of ['one', 'two']) {
      await versioned.client.send(
        new PutObjectCommand({ Bucket: versioned.name, Key: 'v.txt', Body: body, ContentType: 'text/plain' }),
      );
    }
    const [file] = (await versioned.project.call('GET', '/files?q=v.txt')).body.items;
    expect((await versioned.project.call('GET', `/files/${file.id}/versions`)).body.total).toBe(2);
    const plain = await bucketWith();
    for (const body of ['one', 'two']) {
      await plain.client.send(
        new PutObjectCommand({ Bucket: plain.name, Key: 'p.txt', Body: body, ContentType: 'text/plain' }),
      );
    }
    const files = (await plain.project.call('GET', '/files?q=p.txt')).body;
    expect(files.total).toBe(1);
    const got = await plain.client.send(new GetObjectCommand({ Bucket: plain.name, Key: 'p.txt' }));
    expect((await text(got.Body)).toString()).toBe('two');
  });

  it('makes a folder of a zero-byte key ending in /', async () => {
    const { client, name, project } = await bucketWith();
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'empty/', Body: '' }));
    const folders = await project.call('GET', '/folders');
    expect(folders.body.items.map((folder: { path: string }) => folder.path)).toEqual(['empty']);
    const listed = await client.send(new ListObjectsV2Command({ Bucket: name }));
    expect(listed.Contents?.map((entry) => entry.Key)).toEqual(['empty/']);
  });

  it('lists empty folders among the files in binary key order, page by page', async () => {
    const { client, name } = await bucketWith();
    // In UTF-8 byte order '/' (0x2f) sorts before '0' (0x30) and after '.' (0x2e).
    for (const Key of ['c.txt', 'b0.txt', 'a.txt', 'b.txt', 'é.txt']) {
      await client.send(new PutObjectCommand({ Bucket: name, Key, Body: 'x' }));
    }
    for (const Key of ['b/', 'd/']) await client.send(new PutObjectCommand({ Bucket: name, Key, Body: '' }));
    const all = ['a.txt', 'b.txt', 'b/', 'b0.txt', 'c.txt', 'd/', 'é.txt'];
    const whole = await client.send(new ListObjectsV2Command({ Bucket: name }));
    expect(whole.Contents?.map((entry) => entry.Key)).toEqual(all);
    const paged: string[] = [];
    let ContinuationToken: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: name, MaxKeys: 2, ContinuationToken }),
      );
      paged.push(...(page.Contents ?? []).map((entry) => entry.Key!));
      ContinuationToken = page.NextContinuationToken;
    } while (ContinuationToken);
    expect(paged).toEqual(all);
  });

  it("takes a multipart upload: parts, listing them, completing with S3's ETag; the size settles then", async () => {
    const { client, name, project } = await bucketWith();
    const parts = [randomBytes(5 * 1024 * 1024), randomBytes(5 * 1024 * 1024), randomBytes(321)];
    const created = await client.send(
      new CreateMultipartUploadCommand({
        Bucket: name,
        Key: 'big/data.bin',
        ContentType: 'application/octet-stream',
      }),
    );
    const uploadId = created.UploadId!;
    const listedUploads = await client.send(new ListMultipartUploadsCommand({ Bucket: name }));
    expect(listedUploads.Uploads?.map((upload) => [upload.Key, upload.UploadId])).toEqual([
      ['big/data.bin', uploadId],
    ]);
    const etags: string[] = [];
    for (const [index, part] of parts.entries()) {
      const sent = await client.send(
        new UploadPartCommand({
          Bucket: name,
          Key: 'big/data.bin',
          UploadId: uploadId,
          PartNumber: index + 1,
          Body: part,
        }),
      );
      expect(sent.ETag).toBe(`"${md5(part)}"`);
      etags.push(sent.ETag!);
    }
    const listedParts = await client.send(
      new ListPartsCommand({ Bucket: name, Key: 'big/data.bin', UploadId: uploadId }),
    );
    expect(listedParts.Parts?.map((part) => part.Size)).toEqual(parts.map((part) => part.length));
    const done = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key: 'big/data.bin',
        UploadId: uploadId,
        MultipartUpload: { Parts: etags.map((ETag, index) => ({ ETag, PartNumber: index + 1 })) },
      }),
    );
    const whole = Buffer.concat(parts);
    const expectedEtag = `"${md5(Buffer.concat(parts.map((part) => createHash('md5').update(part).digest())))}-3"`;
    expect(done.ETag).toBe(expectedEtag);
    const file = (await project.call('GET', '/files?q=data.bin')).body.items[0];
    expect(file).toMatchObject({ status: 'ready', size_bytes: whole.length });
    const usage = (await project.call('GET', '/usage')).body;
    expect(usage.storage.used_bytes).toBe(whole.length);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'big/data.bin' }));
    expect(
      createHash('sha256')
        .update(await text(got.Body))
        .digest('hex'),
    ).toBe(createHash('sha256').update(whole).digest('hex'));
    expect(
      await refusal(
        client.send(new ListPartsCommand({ Bucket: name, Key: 'big/data.bin', UploadId: uploadId })),
      ),
    ).toEqual({ code: 'NoSuchUpload', status: 404 });
  });

  it('aborts a multipart upload, and refuses a part list that does not match', async () => {
    const { client, name, project } = await bucketWith();
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'x.bin' }));
    const small = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'x.bin', UploadId, PartNumber: 1, Body: 'tiny' }),
    );
    await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'x.bin', UploadId, PartNumber: 2, Body: 'tail' }),
    );
    const complete = (Parts: { ETag: string; PartNumber: number }[]) =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key: 'x.bin',
          UploadId,
          MultipartUpload: { Parts },
        }),
      );
    expect(await refusal(complete([{ ETag: '"0123"', PartNumber: 1 }]))).toEqual({
      code: 'InvalidPart',
      status: 400,
    });
    expect(
      await refusal(
        complete([
          { ETag: small.ETag!, PartNumber: 1 },
          { ETag: small.ETag!, PartNumber: 2 },
        ]),
      ),
    ).toMatchObject({ status: 400 });
    await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key: 'x.bin', UploadId }));
    expect(
      await refusal(
        client.send(
          new UploadPartCommand({ Bucket: name, Key: 'x.bin', UploadId, PartNumber: 3, Body: 'late' }),
        ),
      ),
    ).toEqual({ code: 'NoSuchUpload', status: 404 });
    const failed = (await project.call('GET', '/files?status=failed')).body;
    expect(failed.items.map((file: { failure_reason: string }) => file.failure_reason)).toEqual([
      'upload_aborted',
    ]);
  });

  it('holds a multipart upload to the size limit, and the quota at completion', async () => {
    const { client, name } = await bucketWith({ max_file_size_bytes: 6 * 1024 * 1024 });
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'y.bin' }));
    const parts = [randomBytes(5 * 1024 * 1024), randomBytes(2 * 1024 * 1024)];
    const etags = [];
    for (const [index, part] of parts.entries()) {
      etags.push(
        (
          await client.send(
            new UploadPartCommand({
              Bucket: name,
              Key: 'y.bin',
              UploadId,
              PartNumber: index + 1,
              Body: part,
            }),
          )
        ).ETag!,
      );
    }
    const completing = client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key: 'y.bin',
        UploadId,
        MultipartUpload: { Parts: etags.map((ETag, index) => ({ ETag, PartNumber: index + 1 })) },
      }),
    );
    expect(await refusal(completing)).toEqual({ code: 'EntityTooLarge', status: 400 });
  });

  it('copies objects, keeping or replacing their metadata, and deletes many at once', async () => {
    const { client, name } = await bucketWith();
    await client.send(
      new PutObjectCommand({
        Bucket: name,
        Key: 'src.txt',
        Body: 'copy me',
        ContentType: 'text/plain',
        Metadata: { a: '1' },
      }),
    );
    const copied = await client.send(
      new CopyObjectCommand({ Bucket: name, Key: 'dst.txt', CopySource: `${name}/src.txt` }),
    );
    expect(copied.CopyObjectResult?.ETag).toBe(`"${md5('copy me')}"`);
    const kept = await client.send(new HeadObjectCommand({ Bucket: name, Key: 'dst.txt' }));
    expect(kept).toMatchObject({ Metadata: { a: '1' }, ContentType: 'text/plain' });
    await client.send(
      new CopyObjectCommand({
        Bucket: name,
        Key: 'dst2.txt',
        CopySource: `${name}/src.txt`,
        MetadataDirective: 'REPLACE',
        Metadata: { b: '2' },
        ContentType: 'text/plain',
      }),
    );
    expect((await client.send(new HeadObjectCommand({ Bucket: name, Key: 'dst2.txt' }))).Metadata).toEqual({
      b: '2',
    });
    const deleted = await client.send(
      new DeleteObjectsCommand({
        Bucket: name,
        Delete: { Objects: [{ Key: 'src.txt' }, { Key: 'dst.txt' }, { Key: 'none.txt' }] },
      }),
    );
    expect(deleted.Deleted?.map((entry) => entry.Key).sort()).toEqual(['dst.txt', 'none.txt', 'src.txt']);
    const left = await client.send(new ListObjectsV2Command({ Bucket: name }));
    expect(left.Contents?.map((entry) => entry.Key)).toEqual(['dst2.txt']);
  });

  it('takes temporary credentials minted from an upload token, with every constraint of the token', async () => {
    const { project, name } = await bucketWith({ allowed_mime_types: 'image/*,text/plain' });
    const folder = await project.call('POST', '/folders', { body: { name: 'avatars' } });
    const token = await project.call('POST', '/upload-tokens', {
      body: { allowed_mime_types: ['image/*'], max_size: 100, max_files: 1, folder_id: folder.body.id },
    });
    expect(token.status, JSON.stringify(token.body)).toBe(201);
    const minted = await coffer.call('POST', `/v1/projects/${project.id}/s3-credentials/temporary`, {
      token: token.body.token,
      body: {},
    });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    expect(minted.body).toMatchObject({ bucket: name, prefix: 'avatars/' });
    const browser = clientFor(
      minted.body.access_key_id,
      minted.body.secret_access_key,
      minted.body.session_token,
    );
    const put = (Key: string, Body: string | Buffer, ContentType: string) =>
      browser.send(new PutObjectCommand({ Bucket: name, Key, Body, ContentType }));
    expect(await refusal(put('avatars/a.txt', 'text', 'text/plain'))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    expect(await refusal(put('avatars/big.png', Buffer.alloc(101), 'image/png'))).toEqual({
      code: 'EntityTooLarge',
      status: 400,
    });
    expect(await refusal(put('elsewhere/a.png', Buffer.alloc(10), 'image/png'))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    await put('avatars/me.png', Buffer.alloc(10), 'image/png');
    expect(await refusal(put('avatars/second.png', Buffer.alloc(10), 'image/png'))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    const [file] = (await project.call('GET', '/files?q=me.png')).body.items;
    expect(file).toMatchObject({ folder_id: folder.body.id, status: 'ready' });
    expect(await refusal(browser.send(new ListObjectsV2Command({ Bucket: name })))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    const tampered = clientFor(
      minted.body.access_key_id,
      minted.body.secret_access_key,
      `${minted.body.session_token}x`,
    );
    const forged = tampered.send(new PutObjectCommand({ Bucket: name, Key: 'avatars/x.png', Body: 'x' }));
    expect(await refusal(forged)).toEqual({ code: 'InvalidToken', status: 400 });
  });

  it("answers past a credential's rate limit with 503 SlowDown and Retry-After", async () => {
    const { project, name, client } = await bucketWith();
    await coffer.call('PATCH', `/v1/projects/${project.id}`, {
      token: ADMIN_KEY,
      body: { settings: { rate_limit_per_minute: 2 } },
    });
    await client.send(new HeadBucketCommand({ Bucket: name }));
    await client.send(new HeadBucketCommand({ Bucket: name }));
    const url = await getSignedUrl(client, new ListObjectsV2Command({ Bucket: name }), { expiresIn: 60 });
    const refused = await fetch(url);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.text()).toContain('<Code>SlowDown</Code>');
  });
});
