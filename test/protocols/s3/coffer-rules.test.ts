import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { ADMIN_KEY } from '../../support/coffer.ts';
import { drain, PNG } from '../../support/pipeline.ts';
import { md5, refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// Coffer's rules through the S3 endpoint, as the current AWS SDK for JavaScript meets them: allowed
// types, the size limit and the quota, scanning before reading, and a credential's rate limit.
const { coffer, bucketWith } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  it("keeps Coffer's rules: allowed types, quotas, and scanning before reading", async () => {
    const images = await bucketWith({ allowed_mime_types: 'image/*' });
    expect(
      await refusal(
        images.client.send(
          new PutObjectCommand({ Bucket: images.name, Key: 'a.txt', Body: 'x', ContentType: 'text/plain' }),
        ),
      ),
    ).toEqual({ code: 'AccessDenied', status: 403 });
    // The bytes' own type counts too: a single PUT, and the first part of a multipart upload.
    const sniffed = (error: { code: string; status: number | undefined }) =>
      expect(error).toEqual({ code: 'AccessDenied', status: 403 });
    sniffed(
      await refusal(
        images.client.send(
          new PutObjectCommand({
            Bucket: images.name,
            Key: 'b.png',
            Body: 'x'.repeat(100),
            ContentType: 'image/png',
          }),
        ),
      ),
    );
    const started = await images.client.send(
      new CreateMultipartUploadCommand({ Bucket: images.name, Key: 'c.png', ContentType: 'image/png' }),
    );
    const part = (PartNumber: number, Body: Buffer) =>
      images.client.send(
        new UploadPartCommand({
          Bucket: images.name,
          Key: 'c.png',
          UploadId: started.UploadId,
          PartNumber,
          Body,
        }),
      );
    sniffed(await refusal(part(1, Buffer.from('%PDF-1.7 not an image'))));
    await part(1, PNG);
    await part(2, Buffer.from('later parts are not sniffed'));
    await images.client.send(
      new AbortMultipartUploadCommand({ Bucket: images.name, Key: 'c.png', UploadId: started.UploadId }),
    );
    await images.client.send(
      new PutObjectCommand({ Bucket: images.name, Key: 'real.png', Body: PNG, ContentType: 'image/png' }),
    );
    expect(
      (await images.project.call('GET', '/files?status=ready')).body.items.map(
        (f: { filename: string }) => f.filename,
      ),
    ).toEqual(['real.png']);
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
    // Only its bytes wait for the scan: HeadObject answers with its headers, as S3 does.
    const pending = await scanned.client.send(
      new HeadObjectCommand({ Bucket: scanned.name, Key: 'wait.txt' }),
    );
    expect(pending).toMatchObject({ ContentLength: 4, ETag: `"${md5('wait')}"` });
    await drain(coffer.services.pipeline);
    const got = await scanned.client.send(new GetObjectCommand({ Bucket: scanned.name, Key: 'wait.txt' }));
    expect((await text(got.Body)).toString()).toBe('wait');
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
