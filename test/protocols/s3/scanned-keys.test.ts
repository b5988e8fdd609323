import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { drain, eventTypes } from '../../support/pipeline.ts';
import { type Bucket, s3EndpointSuite, shownOf } from '../../support/s3-endpoint.ts';

// Writes over a key whose file is still being scanned (never readable yet): S3 replaces an object a
// PUT is sent over, so the key keeps one file, the newest write's, and deleting it leaves the key empty.
const { coffer, bucketWith } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  /** The ids of the bucket's files, oldest first, deleted ones too. */
  const fileIds = async ({ project }: Bucket) =>
    (
      await coffer.services.db.query<{ id: string }>(
        'SELECT id FROM files WHERE project_id = $1 ORDER BY id',
        [project.id],
      )
    ).map((row) => row.id);

  const put = ({ client, name }: Bucket, Key: string, Body: string) =>
    client.send(new PutObjectCommand({ Bucket: name, Key, Body, ContentType: 'text/plain' }));

  /** A multipart upload of `body` at `key`, made and completed. */
  async function upload({ client, name }: Bucket, Key: string, body: string) {
    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket: name, Key, ContentType: 'text/plain' }),
    );
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: body }),
    );
    return client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key,
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
  }

  for (const versioning_enabled of [false, true]) {
    const bucketing = versioning_enabled ? 'keeping versions' : 'keeping none';

    it(`replaces a file still being scanned with a PutObject over its key (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled, virus_scan_enabled: true });
      await put(bucket, 's.txt', 'first');
      const second = await put(bucket, 's.txt', 'second');
      const [first, kept] = await fileIds(bucket);
      // The file the first PUT made was never readable: it is deleted as the second one commits.
      expect((await bucket.project.call('GET', `/files/${first}`)).status).toBe(404);
      expect(await eventTypes(coffer.services.db, first!)).toEqual(['file.uploaded', 'file.deleted']);
      await drain(coffer.services.pipeline);
      expect((await bucket.project.call('GET', `/files/${kept}`)).body).toMatchObject({ status: 'ready' });
      expect(await shownOf(bucket, 's.txt')).toEqual({
        got: 'second',
        listed: [['s.txt', second.ETag]],
        versions: [second.VersionId ?? 'null'],
      });
      await bucket.client.send(new DeleteObjectCommand({ Bucket: bucket.name, Key: 's.txt' }));
      expect(await shownOf(bucket, 's.txt')).toMatchObject({ got: 'NoSuchKey', listed: [] });
    });

    it(`replaces a file still being scanned with a multipart upload completed over its key (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled, virus_scan_enabled: true });
      await put(bucket, 'm.txt', 'first');
      const completed = await upload(bucket, 'm.txt', 'parts');
      const [first] = await fileIds(bucket);
      expect((await bucket.project.call('GET', `/files/${first}`)).status).toBe(404);
      await drain(coffer.services.pipeline);
      expect(await shownOf(bucket, 'm.txt')).toEqual({
        got: 'parts',
        listed: [['m.txt', completed.ETag]],
        versions: [completed.VersionId ?? 'null'],
      });
      await bucket.client.send(new DeleteObjectCommand({ Bucket: bucket.name, Key: 'm.txt' }));
      expect(await shownOf(bucket, 'm.txt')).toMatchObject({ got: 'NoSuchKey', listed: [] });
    });
  }

  it('keeps a file being scanned under a legal hold: the write over its key makes a file of its own', async () => {
    const bucket = await bucketWith({ virus_scan_enabled: true });
    await put(bucket, 'h.txt', 'held');
    const [held] = await fileIds(bucket);
    const hold = await bucket.project.call('PUT', `/files/${held}/legal-hold`, {
      body: { reason: 'litigation' },
    });
    expect(hold.status).toBe(200);
    await put(bucket, 'h.txt', 'newer');
    await drain(coffer.services.pipeline);
    expect(await shownOf(bucket, 'h.txt')).toMatchObject({ got: 'newer' });
    expect((await bucket.project.call('GET', `/files/${held}`)).body).toMatchObject({
      status: 'ready',
      legal_hold: true,
    });
  });
});
