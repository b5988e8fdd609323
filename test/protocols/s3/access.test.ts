import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetBucketLocationCommand,
  GetBucketTaggingCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/lib/secrets.ts';
import { ADMIN_KEY, madeBeforeAll } from '../../support/coffer.ts';
import { PNG } from '../../support/pipeline.ts';
import { refusal, s3EndpointSuite } from '../../support/s3-endpoint.ts';

// The S3 endpoint's bucket and who may reach it, as the current AWS SDK for JavaScript talks to it: the
// project as its bucket, what a credential may do and see, presigned URLs, and temporary credentials
// minted from upload tokens; every result is checked through Coffer's own REST API too.
const { coffer, bucketWith, clientFor } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  const bucket = madeBeforeAll(() => bucketWith());

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
    // A value no header can hold is refused before anything is sent, as S3 does.
    const broken = await getSignedUrl(
      client,
      new GetObjectCommand({
        Bucket: name,
        Key: 'signed.txt',
        ResponseContentDisposition: 'attachment;\r\nfilename="x.txt"',
      }),
      { expiresIn: 60 },
    );
    const refused = await fetch(broken);
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain('<Code>InvalidArgument</Code>');
    const tampered = await fetch(url.replace('signed.txt', 'signed2.txt'));
    expect(tampered.status).toBe(403);
    expect(await tampered.text()).toContain('<Code>SignatureDoesNotMatch</Code>');
  });

  it('takes metadata from the signed query of presigned PutObject and CreateMultipartUpload URLs', async () => {
    // The SDK's presigner moves x-amz-meta-* headers into the URL (an application's backend signing
    // for a browser does just that), and S3 takes them from there.
    const { client, name, project, keys } = bucket;
    // As such a backend does, without the checksum of an empty body the SDK would sign otherwise.
    const presigner = clientFor(...keys, undefined, { requestChecksumCalculation: 'WHEN_REQUIRED' });
    const Metadata = { camera: 'pinhole', album: 'spring 2026' };
    const put = await getSignedUrl(
      presigner,
      new PutObjectCommand({ Bucket: name, Key: 'hoisted/put.txt', Metadata }),
      { expiresIn: 60 },
    );
    expect(new URL(put).searchParams.get('x-amz-meta-camera')).toBe('pinhole');
    expect((await fetch(put, { method: 'PUT', body: 'hoisted' })).status).toBe(200);

    const create = await getSignedUrl(
      presigner,
      new CreateMultipartUploadCommand({ Bucket: name, Key: 'hoisted/parts.bin', Metadata }),
      { expiresIn: 60 },
    );
    const created = await fetch(create, { method: 'POST' });
    expect(created.status).toBe(200);
    const UploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())![1]!;
    const Key = 'hoisted/parts.bin';
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: 'one part' }),
    );
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key,
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );

    for (const filename of ['put.txt', 'parts.bin']) {
      const listed = await project.call('GET', `/files?q=${filename}`);
      expect(listed.body.items[0], filename).toMatchObject({ filename, status: 'ready', metadata: Metadata });
    }
    const head = await client.send(new HeadObjectCommand({ Bucket: name, Key: 'hoisted/put.txt' }));
    expect(head.Metadata).toEqual(Metadata);
    presigner.destroy();
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
    // A name S3 never allows is invalid, one with a prefix or suffix it reserves too; one it allows but
    // no bucket has (Coffer's take no dots) is missing.
    const reserved = [
      'xn--a',
      'sthree-a',
      'amzn-s3-demo-a',
      'a-s3alias',
      'a--ol-s3',
      'a.mrap',
      'a--table-s3',
    ];
    for (const invalid of ['a', 'My_Bucket', 'two..dots', '192.168.0.1', '-edge', ...reserved]) {
      expect(await refusal(bucket.client.send(new ListObjectsV2Command({ Bucket: invalid })))).toEqual({
        code: 'InvalidBucketName',
        status: 400,
      });
    }
    // The SDK sends a name ending in --x-s3 to a directory bucket's own endpoint: this one goes by the path.
    const directory = clientFor(...bucket.keys);
    directory.middlewareStack.add(
      (next) => (args) => {
        const sent = args.request as { path: string };
        sent.path = sent.path.replace('/s3/placeholder', '/s3/a--x-s3');
        return next(args);
      },
      { step: 'build' },
    );
    expect(await refusal(directory.send(new ListObjectsV2Command({ Bucket: 'placeholder' })))).toEqual({
      code: 'InvalidBucketName',
      status: 400,
    });
    // A project may not be given a name S3 reserves; one named so before that rule is still served:
    // the caller's own bucket is its bucket whatever its name.
    const own = await bucketWith();
    const renamed = `sthree-${own.name}`;
    const renaming = await own.project.call('PATCH', '', { token: ADMIN_KEY, body: { bucket: renamed } });
    expect(renaming.status).toBe(422);
    await coffer.services.db.query('UPDATE projects SET bucket = $1 WHERE id = $2', [
      renamed,
      own.project.id,
    ]);
    await coffer.services.cache.del(`project:${own.project.id}`);
    await own.client.send(new PutObjectCommand({ Bucket: renamed, Key: 'kept.txt', Body: 'x' }));
    const listed = await own.client.send(new ListObjectsV2Command({ Bucket: renamed }));
    expect(listed.Contents?.map((object) => object.Key)).toEqual(['kept.txt']);
    expect(await refusal(bucket.client.send(new GetObjectCommand({ Bucket: 'no.such', Key: 'x' })))).toEqual({
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
    // The error names its resource as S3 does (the bucket and key, no mount); a method S3 has no use
    // for is 405 in S3's words.
    const anonymous = await fetch(`${coffer.url}/s3/${bucket.name}/some/key.txt`);
    expect(anonymous.status).toBe(403);
    expect(await anonymous.text()).toContain(`<Resource>/${bucket.name}/some/key.txt</Resource>`);
    const patched = await fetch(`${coffer.url}/s3/${bucket.name}/some/key.txt`, { method: 'PATCH' });
    expect(patched.status).toBe(405);
    expect(patched.headers.get('allow')).toBe('GET, HEAD, PUT, POST, DELETE');
    expect(await patched.text()).toContain('<Code>MethodNotAllowed</Code>');
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
    expect(await refusal(put('elsewhere/a.png', PNG, 'image/png'))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    // An allowed type declared for other bytes: refused on what the bytes are, and not counted.
    expect(await refusal(put('avatars/fake.png', 'plain text', 'image/png'))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    await put('avatars/me.png', PNG, 'image/png');
    // New content at its key is held to the token's constraints as well.
    expect(await refusal(put('avatars/me.png', Buffer.concat([PNG, Buffer.alloc(40)]), 'image/png'))).toEqual(
      {
        code: 'EntityTooLarge',
        status: 400,
      },
    );
    expect(await refusal(put('avatars/second.png', PNG, 'image/png'))).toEqual({
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

  it('answers temporary credentials whose upload token expired with ExpiredToken, as S3 an expired session', async () => {
    const { project, name } = await bucketWith();
    const token = await project.call('POST', '/upload-tokens', { body: {} });
    const minted = await project.call('POST', '/s3-credentials/temporary', {
      token: token.body.token,
      body: {},
    });
    expect(minted.status).toBe(201);
    const { access_key_id, secret_access_key, session_token } = minted.body;
    const browser = clientFor(access_key_id, secret_access_key, session_token);
    const put = () => browser.send(new PutObjectCommand({ Bucket: name, Key: 'late.txt', Body: 'late' }));
    await put();
    await coffer.services.db.query(
      "UPDATE upload_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1",
      [sha256Hex(token.body.token)],
    );
    // Clients such as Uppy fetch new credentials on ExpiredToken; a forged session stays InvalidToken.
    expect(await refusal(put())).toEqual({ code: 'ExpiredToken', status: 400 });
    const forged = clientFor(access_key_id, secret_access_key, `${session_token}x`);
    expect(await refusal(forged.send(new HeadBucketCommand({ Bucket: name })))).toMatchObject({
      status: 400,
    });
    expect((await project.call('GET', '/files?q=late.txt')).body.total).toBe(1);
  });
});
