import { randomBytes } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  type CopyObjectCommandInput,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
  type UploadPartCopyCommandInput,
} from '@aws-sdk/client-s3';
import { describe, expect, it, type MockInstance, vi } from 'vitest';
import { md5, newS3Credential, refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// Copies through the S3 endpoint, as the current AWS SDK for JavaScript sends them: CopyObject under its
// metadata directive, onto itself and of an old version, and UploadPartCopy into a multipart upload.
const { coffer, bucketWith, clientFor } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  it('closes the source read of a CopyObject refused before its bytes are read', async () => {
    const { client, name } = await bucketWith();
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'src.txt', Body: 'source' }));
    const { store } = coffer.services;
    const read = store.read;
    const destroys: MockInstance[] = [];
    store.read = async (...args: Parameters<typeof store.read>) => {
      const stream = await read.apply(store, args);
      destroys.push(vi.spyOn(stream, 'destroy'));
      return stream;
    };
    try {
      // A folder key takes no bytes: refused before the copy reads any.
      expect(
        await refusal(
          client.send(new CopyObjectCommand({ Bucket: name, Key: 'dir/', CopySource: `${name}/src.txt` })),
        ),
      ).toEqual({ code: 'InvalidRequest', status: 400 });
    } finally {
      store.read = read;
    }
    expect(destroys).toHaveLength(1);
    expect(destroys[0]).toHaveBeenCalled();
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

  it("gives a copy exactly its source's metadata (COPY) or the request's (REPLACE), none included, over any object there", async () => {
    const { client, name, project } = await bucketWith();
    const put = (Key: string, Metadata: Record<string, string>) =>
      client.send(
        new PutObjectCommand({ Bucket: name, Key, Body: Key, ContentType: 'text/plain', Metadata }),
      );
    const copy = (Key: string, source: string, replace?: Partial<CopyObjectCommandInput>) =>
      client.send(
        new CopyObjectCommand({
          Bucket: name,
          Key,
          CopySource: `${name}/${source}`,
          ...(replace ? { MetadataDirective: 'REPLACE', ...replace } : {}),
        }),
      );
    const metadata = async (Key: string) =>
      (await client.send(new HeadObjectCommand({ Bucket: name, Key }))).Metadata;
    await put('bare.txt', {});
    await put('tagged.txt', { a: '1' });
    await put('dst.txt', { old: 'yes' });
    // A PutObject without metadata keeps the file's; a copy never merges with what the key had.
    await put('dst.txt', {});
    expect(await metadata('dst.txt')).toEqual({ old: 'yes' });
    await copy('dst.txt', 'bare.txt');
    expect(await metadata('dst.txt')).toEqual({});
    await put('dst.txt', { old: 'yes' });
    await copy('dst.txt', 'tagged.txt');
    expect(await metadata('dst.txt')).toEqual({ a: '1' });
    await copy('dst.txt', 'tagged.txt', { Metadata: { b: '2' } });
    expect(await metadata('dst.txt')).toEqual({ b: '2' });
    await copy('dst.txt', 'tagged.txt', {});
    expect(await metadata('dst.txt')).toEqual({});
    // COPY keeps values that have no header form too: a number set through the REST API.
    const [tagged] = (await project.call('GET', '/files?q=tagged.txt')).body.items;
    const typed = await project.call('PUT', `/files/${tagged.id}/metadata`, {
      body: { metadata: { a: '1', count: 3 } },
    });
    expect(typed.status).toBe(200);
    const copied = await copy('typed.txt', 'tagged.txt');
    expect(copied.$metadata.httpStatusCode).toBe(200);
    const [typedCopy] = (await project.call('GET', '/files?q=typed.txt')).body.items;
    expect(typedCopy.metadata).toEqual({ a: '1', count: 3 });
    // REPLACE without a Content-Type keeps the source's type.
    await copy('new.txt', 'tagged.txt', {});
    expect(await client.send(new HeadObjectCommand({ Bucket: name, Key: 'new.txt' }))).toMatchObject({
      Metadata: {},
      ContentType: 'text/plain',
    });
  });

  it('refuses a metadata directive other than COPY or REPLACE, storing nothing', async () => {
    const { client, name } = await bucketWith();
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'src.txt', Body: 'source', Metadata: { a: '1' } }),
    );
    await expect(
      client.send(
        new CopyObjectCommand({
          Bucket: name,
          Key: 'dst.txt',
          CopySource: `${name}/src.txt`,
          MetadataDirective: 'MOVE' as 'REPLACE',
        }),
      ),
    ).rejects.toMatchObject({
      name: 'InvalidArgument',
      message: 'Unknown metadata directive.',
      $metadata: { httpStatusCode: 400 },
    });
    expect(await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key: 'dst.txt' })))).toEqual({
      code: 'NotFound',
      status: 404,
    });
  });

  it('refuses a CopyObject of an object onto itself that changes nothing; REPLACE or a version restores', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    const put = await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'doc.txt', Body: 'words', Metadata: { a: '1' } }),
    );
    const copy = (input: Partial<CopyObjectCommandInput> = {}) =>
      client.send(
        new CopyObjectCommand({ Bucket: name, Key: 'doc.txt', CopySource: `${name}/doc.txt`, ...input }),
      );
    const versions = async () =>
      (await client.send(new ListObjectVersionsCommand({ Bucket: name }))).Versions?.map((v) => v.VersionId);
    for (const input of [{}, { MetadataDirective: 'COPY' as const }]) {
      await expect(copy(input)).rejects.toMatchObject({
        name: 'InvalidRequest',
        message:
          "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
        $metadata: { httpStatusCode: 400 },
      });
    }
    expect(await versions()).toEqual([put.VersionId]);
    // Copying a version of the object onto its key restores it, a new version.
    await copy({ CopySource: `${name}/doc.txt?versionId=${put.VersionId}` });
    expect(await versions()).toHaveLength(2);
    // REPLACE onto itself changes the metadata.
    await copy({ MetadataDirective: 'REPLACE', Metadata: { b: '2' } });
    expect((await client.send(new HeadObjectCommand({ Bucket: name, Key: 'doc.txt' }))).Metadata).toEqual({
      b: '2',
    });
  });

  it('copies ranges and whole objects into a multipart upload (UploadPartCopy), byte for byte', async () => {
    const { client, name, project } = await bucketWith();
    const source = randomBytes(6 * 1024 * 1024 + 7);
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'src/big.bin', Body: source }));
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'src/small.txt', Body: 'small' }));
    // What the aws cli reads of a source before copying it in parts: it has no tags.
    const tagging = await client.send(new GetObjectTaggingCommand({ Bucket: name, Key: 'src/big.bin' }));
    expect(tagging.TagSet ?? []).toEqual([]);
    const Key = 'assembled.bin';
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key }));
    const copyPart = (PartNumber: number, CopySource: string, CopySourceRange?: string) =>
      client.send(
        new UploadPartCopyCommand({ Bucket: name, Key, UploadId, PartNumber, CopySource, CopySourceRange }),
      );
    // All but the first MiB of big.bin, then 5 MiB sent with the request, then all of small.txt.
    const sent = randomBytes(5 * 1024 * 1024);
    const first = await copyPart(1, `${name}/src/big.bin`, `bytes=1048576-${source.length - 1}`);
    expect(first.CopyPartResult?.ETag).toBe(`"${md5(source.subarray(1048576))}"`);
    expect(Date.parse(first.CopyPartResult?.LastModified?.toISOString() ?? '')).toBeGreaterThan(0);
    const second = await client.send(
      new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 2, Body: sent }),
    );
    const third = await copyPart(3, `/${name}/src/small.txt`);
    expect(third.CopyPartResult?.ETag).toBe(`"${md5('small')}"`);
    const listed = await client.send(new ListPartsCommand({ Bucket: name, Key, UploadId }));
    expect(listed.Parts?.map((part) => part.Size)).toEqual([source.length - 1048576, sent.length, 5]);
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key,
        UploadId,
        MultipartUpload: {
          Parts: [first.CopyPartResult!.ETag!, second.ETag!, third.CopyPartResult!.ETag!].map((ETag, at) => ({
            ETag,
            PartNumber: at + 1,
          })),
        },
      }),
    );
    const whole = Buffer.concat([source.subarray(1048576), sent, Buffer.from('small')]);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key }));
    expect((await text(got.Body)).equals(whole)).toBe(true);
    expect((await project.call('GET', '/usage')).body.storage.used_bytes).toBe(
      source.length + 5 + whole.length,
    );
  });

  it('refuses an UploadPartCopy as S3 does: source, range, conditions, upload and scope', async () => {
    const { client, name, project } = await bucketWith();
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'src.txt', Body: 'ten bytes!' }));
    const Key = 'dst.bin';
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key }));
    const copyPart = (input: Partial<UploadPartCopyCommandInput>, as = client) =>
      refusal(
        as.send(
          new UploadPartCopyCommand({
            Bucket: name,
            Key,
            UploadId,
            PartNumber: 1,
            CopySource: `${name}/src.txt`,
            ...input,
          }),
        ),
      );
    expect(await copyPart({ CopySource: `${name}/none.txt` })).toEqual({ code: 'NoSuchKey', status: 404 });
    expect(await copyPart({ CopySource: 'other-bucket/src.txt' })).toEqual({
      code: 'NoSuchBucket',
      status: 404,
    });
    expect(await copyPart({ CopySourceRange: '0-3' })).toEqual({ code: 'InvalidArgument', status: 400 });
    expect(await copyPart({ CopySourceRange: 'bytes=2-' })).toEqual({ code: 'InvalidArgument', status: 400 });
    expect(await copyPart({ CopySourceRange: 'bytes=5-10' })).toEqual({ code: 'InvalidRange', status: 416 });
    expect(await copyPart({ CopySourceRange: 'bytes=5-4' })).toEqual({ code: 'InvalidRange', status: 416 });
    expect(await copyPart({ CopySourceIfMatch: '"nope"' })).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await copyPart({ UploadId: 'upl_none' })).toEqual({ code: 'NoSuchUpload', status: 404 });
    // Without files:read the source's bytes are not the caller's to copy.
    const uploadOnly = await newS3Credential(coffer, project.id, ['files:upload']);
    const writer = clientFor(uploadOnly.access_key_id, uploadOnly.secret_access_key);
    expect(await copyPart({}, writer)).toEqual({ code: 'AccessDenied', status: 403 });
    const listed = await client.send(new ListPartsCommand({ Bucket: name, Key, UploadId }));
    expect(listed.Parts ?? []).toEqual([]);
  });

  it('copies an old version of an object, by CopyObject and UploadPartCopy; an unknown one is NoSuchVersion', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    const put = (Body: string) =>
      client.send(new PutObjectCommand({ Bucket: name, Key: 'doc.txt', Body, ContentType: 'text/plain' }));
    await put('first words');
    await put('second words');
    const listed = await client.send(new ListObjectVersionsCommand({ Bucket: name, Prefix: 'doc.txt' }));
    const old = listed.Versions![1]!;
    // Restoring the old version: copied over its own key, it becomes the newest.
    const restored = await client.send(
      new CopyObjectCommand({
        Bucket: name,
        Key: 'doc.txt',
        CopySource: `${name}/doc.txt?versionId=${old.VersionId}`,
      }),
    );
    expect(restored.CopySourceVersionId).toBe(old.VersionId);
    expect(restored.CopyObjectResult?.ETag).toBe(`"${md5('first words')}"`);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'doc.txt' }));
    expect((await text(got.Body)).toString()).toBe('first words');
    const versions = await client.send(new ListObjectVersionsCommand({ Bucket: name, Prefix: 'doc.txt' }));
    expect(versions.Versions).toHaveLength(3);
    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket: name, Key: 'part.txt' }),
    );
    const part = await client.send(
      new UploadPartCopyCommand({
        Bucket: name,
        Key: 'part.txt',
        UploadId,
        PartNumber: 1,
        CopySource: `${name}/doc.txt?versionId=${old.VersionId}`,
        CopySourceRange: 'bytes=6-10',
      }),
    );
    expect(part.CopySourceVersionId).toBe(old.VersionId);
    expect(part.CopyPartResult?.ETag).toBe(`"${md5('words')}"`);
    const unknown = `${name}/doc.txt?versionId=ver_01ARZ3NDEKTSV4RRFFQ69G5FAV`;
    expect(
      await refusal(client.send(new CopyObjectCommand({ Bucket: name, Key: 'x.txt', CopySource: unknown }))),
    ).toEqual({ code: 'NoSuchVersion', status: 404 });
    expect(
      await refusal(
        client.send(
          new UploadPartCopyCommand({
            Bucket: name,
            Key: 'part.txt',
            UploadId,
            PartNumber: 2,
            CopySource: unknown,
          }),
        ),
      ),
    ).toEqual({ code: 'NoSuchVersion', status: 404 });
  });
});
