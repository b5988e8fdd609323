import {
  DeleteObjectCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { type Bucket, refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// A CompleteMultipartUpload whose process lost the store's answer once the object was assembled
// (as a crash there would): the reaper settles the upload, and it ends as the complete would have
// ended it, the tags its CreateMultipartUpload named included, the key still holding one file.
const { coffer, bucketWith, strandCompletion } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  /** A multipart upload of `body` at `Key`, tagged `Tagging`, whose completion is left to the reaper. */
  async function strand(bucket: Bucket, Key: string, body: string, Tagging?: string) {
    const uploadId = await strandCompletion(bucket, Key, { body, create: { Tagging } });
    await coffer.services.db.query(
      "UPDATE multipart_sessions SET completing_since = now() - interval '2 hours' WHERE id = $1",
      [uploadId],
    );
    return uploadId;
  }

  for (const versioning_enabled of [false, true]) {
    it(`gives the file an upload over its key settled by the reaper that upload's tags (${versioning_enabled ? 'keeping versions' : 'keeping none'})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name } = bucket;
      await client.send(
        new PutObjectCommand({ Bucket: name, Key: 't.txt', Body: 'old', Tagging: 'was=old' }),
      );
      await strand(bucket, 't.txt', 'new parts', 'stage=done&team=a');
      await coffer.services.multipart.reap();

      const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 't.txt' }));
      expect((await text(got.Body)).toString()).toBe('new parts');
      const tagged = await client.send(new GetObjectTaggingCommand({ Bucket: name, Key: 't.txt' }));
      expect(tagged.TagSet).toEqual([
        { Key: 'stage', Value: 'done' },
        { Key: 'team', Value: 'a' },
      ]);
    });
  }

  it('keeps a key to one file when a write there overtook a new file the reaper settles', async () => {
    const bucket = await bucketWith();
    const { client, name, project } = bucket;
    const uploadId = await strand(bucket, 'n.txt', 'stranded parts');
    const put = await client.send(new PutObjectCommand({ Bucket: name, Key: 'n.txt', Body: 'newer' }));
    await coffer.services.multipart.reap();

    const [session] = await coffer.services.db.query<{ status: string; file_id: string }>(
      'SELECT status, file_id FROM multipart_sessions WHERE id = $1',
      [uploadId],
    );
    expect(session!.status).toBe('completed');
    expect((await project.call('GET', `/files/${session!.file_id}`)).body).toMatchObject({
      status: 'failed',
      failure_reason: 'superseded',
    });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: name }));
    expect((listed.Contents ?? []).map((object) => [object.Key, object.ETag])).toEqual([['n.txt', put.ETag]]);
    await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'n.txt' }));
    expect(await refusal(client.send(new GetObjectCommand({ Bucket: name, Key: 'n.txt' })))).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });
  });
});
