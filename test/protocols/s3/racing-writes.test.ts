import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { backend } from '../../support/backends.ts';
import { drain } from '../../support/pipeline.ts';
import { md5, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// Writes racing at one key of the S3 endpoint, as the current AWS SDK for JavaScript sends them: the last
// writer wins; a write overtaken is answered as S3 answers it, but not kept, and its bytes count against
// no quota.
const { coffer, bucketWith, cutInAfterNextWrite } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  it('answers 200 to a PutObject a newer one overtook, which is not kept: the last writer wins', async () => {
    const { client, name, project } = await bucketWith({ versioning_enabled: true });
    const put = (Body: string) =>
      client.send(new PutObjectCommand({ Bucket: name, Key: 'k.txt', Body, ContentType: 'text/plain' }));
    await put('first');
    // The newer write begins and is recorded while the older one's bytes are stored, not yet recorded.
    const undo = cutInAfterNextWrite(() => put('newer'));
    try {
      const older = await put('older');
      expect(older.ETag).toBe(`"${md5('older')}"`);
      // Not kept, it is no version: it names none.
      expect(older.VersionId).toBeUndefined();
    } finally {
      undo();
    }
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'k.txt' }));
    expect((await text(got.Body)).toString()).toBe('newer');
    const contents = await coffer.services.db.query(
      'SELECT status, failure_reason FROM pending_contents WHERE project_id = $1 ORDER BY id',
      [project.id],
    );
    expect(contents).toEqual([
      { status: 'failed', failure_reason: 'superseded' },
      { status: 'committed', failure_reason: null },
    ]);
    const versions = await client.send(new ListObjectVersionsCommand({ Bucket: name }));
    expect(versions.Versions).toHaveLength(2);
  });

  it('answers no version id to a CompleteMultipartUpload a newer PutObject overtook', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'm.txt', Body: 'first' }));
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'm.txt' }));
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'm.txt', UploadId, PartNumber: 1, Body: 'parts' }),
    );
    const newer = await client.send(new PutObjectCommand({ Bucket: name, Key: 'm.txt', Body: 'newer' }));
    const completed = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key: 'm.txt',
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    expect(completed.VersionId).toBeUndefined();
    const listed = await client.send(new ListObjectVersionsCommand({ Bucket: name }));
    expect(listed.Versions?.[0]?.VersionId).toBe(newer.VersionId);
    expect(listed.Versions).toHaveLength(2);
  });

  it('completes a multipart upload a newer PutObject overtook, its bytes beyond the quota', async () => {
    const { client, name } = await bucketWith({ max_storage_bytes: 20 });
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'm.txt', Body: 'first' }));
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'm.txt' }));
    const part = await client.send(
      new UploadPartCommand({
        Bucket: name,
        Key: 'm.txt',
        UploadId,
        PartNumber: 1,
        Body: 'sixteen bytes!!!',
      }),
    );
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'm.txt', Body: 'newer' }));
    // 'newer' and the parts' 16 bytes would hold 21: over the quota, were the overtaken bytes kept.
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key: 'm.txt',
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'm.txt' }));
    expect((await text(got.Body)).toString()).toBe('newer');
  });

  it('answers 200 to a PutObject a newer one overtook, its bytes beyond the quota', async () => {
    const { client, name } = await bucketWith({ max_storage_bytes: 20 });
    const put = (Body: string) => client.send(new PutObjectCommand({ Bucket: name, Key: 'q.txt', Body }));
    await put('first');
    // 'newer' and the older write's 16 bytes would hold 21: over the quota, were the overtaken bytes kept.
    const undo = cutInAfterNextWrite(() => put('newer'));
    try {
      const older = await put('sixteen bytes!!!');
      expect(older.ETag).toBe(`"${md5('sixteen bytes!!!')}"`);
    } finally {
      undo();
    }
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'q.txt' }));
    expect((await text(got.Body)).toString()).toBe('newer');
  });

  it('keeps the newest write current when the scans of two writes to a key finish in the other order', async () => {
    const { client, name, project } = await bucketWith({ virus_scan_enabled: true });
    const { db, pipeline } = coffer.services;
    const put = (Body: string) =>
      client.send(new PutObjectCommand({ Bucket: name, Key: 'k.txt', Body, ContentType: 'text/plain' }));
    await put('first');
    await drain(pipeline);
    await put('older');
    await put('newer');
    const [older, newer] = await db.query<{ id: string; storage_key: string }>(
      "SELECT id, storage_key FROM pending_contents WHERE project_id = $1 AND status = 'processing' ORDER BY id",
      [project.id],
    );
    // The older write's scan waits until the newer one's has passed.
    await db.query("UPDATE jobs SET run_at = now() + interval '1 hour' WHERE content_id = $1", [older!.id]);
    await drain(pipeline);
    await db.query('UPDATE jobs SET run_at = now() WHERE content_id = $1', [older!.id]);
    await drain(pipeline);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'k.txt' }));
    expect((await text(got.Body)).toString()).toBe('newer');
    // The older write is not kept: it failed, and its bytes are collected as rejected content's are.
    const settled = await db.query('SELECT status, failure_reason FROM pending_contents WHERE id = $1', [
      older!.id,
    ]);
    expect(settled).toEqual([{ status: 'failed', failure_reason: 'superseded' }]);
    expect(newer).toBeDefined();
    expect(
      await db.query('SELECT 1 FROM retired_objects WHERE storage_key = $1', [newer!.storage_key]),
    ).toEqual([]);
  });

  it.runIf(backend === 'postgres')(
    'records two PutObjects to one key at once, the one after the other',
    async () => {
      const { client, name } = await bucketWith();
      const put = (Body: string) => client.send(new PutObjectCommand({ Bucket: name, Key: 'k.txt', Body }));
      await put('first');
      // Each write, once it recorded its new content, waits for the other to record its own (a second at most).
      const { db } = coffer.services;
      const tx = db.tx;
      let recorded = 0;
      const bothRecorded = Promise.withResolvers<void>();
      db.tx = ((work) =>
        tx.call(db, (q) =>
          work({
            ...q,
            async query(sql, params) {
              const rows = await q.query(sql, params);
              if (/^INSERT INTO pending_contents/.test(sql.trim())) {
                if (++recorded === 2) bothRecorded.resolve();
                await Promise.race([
                  bothRecorded.promise,
                  new Promise((resolve) => setTimeout(resolve, 1000)),
                ]);
              }
              return rows as never;
            },
          }),
        )) as typeof db.tx;
      try {
        const written = await Promise.allSettled([put('one'), put('two')]);
        expect(written.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled']);
      } finally {
        db.tx = tx;
      }
    },
  );
});
