import { Readable } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import type { Caller } from '../../../src/domain/principal.ts';
import { visibleAt } from '../../../src/modules/files/service.ts';
import { backend } from '../../support/backends.ts';
import { type Bucket, md5, s3EndpointSuite, shownOf } from '../../support/s3-endpoint.ts';

// Writes racing to make one new key of the S3 endpoint, as the current AWS SDK for JavaScript sends
// them, in buckets keeping versions and keeping none: whichever records first, the key ends with one
// file, the newest write's bytes current.
const { coffer, bucketWith, cutInAfterNextWrite } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  /** A bucket's multipart upload of `parts` at `key`, its part uploaded; answers its completion. */
  async function uploadOf({ client, name }: Bucket, Key: string, parts: string) {
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key }));
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: parts }),
    );
    return () =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key,
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
        }),
      );
  }

  /**
   * Two writes that cross: `older` begins and is held once its bytes are stored; `newer` then begins
   * (finding the key as `older` left it) and, once its own bytes are stored, lets `older` record its
   * write and runs `meanwhile`, before it records its own. Answers both writes' answers.
   */
  async function crossing<T>(
    older: () => Promise<T>,
    newer: () => Promise<T>,
    meanwhile?: () => Promise<void>,
  ) {
    let hold!: () => void;
    const held = new Promise<void>((resolve) => {
      hold = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let first: Promise<T> | undefined;
    const undo = cutInAfterNextWrite(
      () => {
        hold();
        return released;
      },
      async () => {
        release();
        await first;
        await meanwhile?.();
      },
    );
    try {
      first = older();
      await held;
      const second = await newer();
      return { older: await first, newer: second };
    } finally {
      undo();
    }
  }

  it.runIf(backend === 'postgres')(
    'makes a file of a PutObject whose key showed a file deleted before the write could lock it',
    async () => {
      const b = await bucketWith();
      await b.client.send(new PutObjectCommand({ Bucket: b.name, Key: 'd.txt', Body: 'old' }));
      const project = (await coffer.services.projects.getProject(b.project.id))!;
      const caller: Caller = {
        project,
        principal: { kind: 'api_key', keyId: 'key_test', projectId: project.id, scopes: ['files:upload'] },
      };
      const bytes = Buffer.from('new');
      const written = await coffer.services.ingest.writeAtKey(
        caller,
        { filename: 'd.txt', content_type: 'text/plain', size_bytes: bytes.length, exact_folder: true },
        Readable.from([bytes]),
        {
          holder: async (q) => {
            const held = await visibleAt(q, caller, 'd.txt');
            // A DeleteObject, which holds no key, commits between the key's read and the file's lock.
            await coffer.services.db.query(
              "UPDATE files SET status = 'deleted', deleted_at = now() WHERE id = $1",
              [held!.id],
            );
            return held;
          },
        },
      );
      expect(written.kind).toBe('file');
      expect(await shownOf(b, 'd.txt')).toMatchObject({ got: 'new' });
    },
  );

  for (const versioning_enabled of [false, true]) {
    const bucketing = versioning_enabled ? 'keeping versions' : 'keeping none';
    it(`keeps one file at a key where a PutObject overtook the upload of a new file there (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name, project } = bucket;
      const complete = await uploadOf(bucket, 'a.txt', 'parts');
      const newer = await client.send(new PutObjectCommand({ Bucket: name, Key: 'a.txt', Body: 'newer' }));
      const completed = await complete();
      // Answered as in S3, where the last writer wins, but not kept: it is no version.
      expect(completed.ETag).toMatch(/-1"$/);
      expect(completed.VersionId).toBeUndefined();
      expect(await shownOf(bucket, 'a.txt')).toEqual({
        got: 'newer',
        listed: [['a.txt', newer.ETag]],
        versions: [newer.VersionId ?? 'null'],
      });
      // The upload's file, made before the PUT's.
      const [upload] = await coffer.services.db.query<{ id: string }>(
        'SELECT id FROM files WHERE project_id = $1 ORDER BY id LIMIT 1',
        [project.id],
      );
      expect((await project.call('GET', `/files/${upload!.id}`)).body).toMatchObject({
        status: 'failed',
        failure_reason: 'superseded',
      });
      expect((await project.call('GET', '/usage')).body.storage).toMatchObject({
        used_bytes: 'newer'.length,
        reserved_bytes: 0,
      });
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'a.txt' }));
      expect((await shownOf(bucket, 'a.txt')).listed).toEqual([]);
      expect((await project.call('GET', `/files/${upload!.id}`)).body.status).not.toBe('ready');
    });
    it(`keeps one file at a new key where a newer PutObject of it committed first (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name, project } = bucket;
      const put = (Body: string) => client.send(new PutObjectCommand({ Bucket: name, Key: 'n.txt', Body }));
      // Both find the key free; the newer write is recorded while the older one's bytes are stored.
      let newer: Awaited<ReturnType<typeof put>> | undefined;
      const undo = cutInAfterNextWrite(async () => {
        newer = await put('newer');
      });
      try {
        const older = await put('older');
        // Answered as in S3, where the last writer wins, but not kept: it is no version.
        expect(older.ETag).toBe(`"${md5('older')}"`);
        expect(older.VersionId).toBeUndefined();
      } finally {
        undo();
      }
      expect(await shownOf(bucket, 'n.txt')).toEqual({
        got: 'newer',
        listed: [['n.txt', newer!.ETag]],
        versions: [newer!.VersionId ?? 'null'],
      });
      const files = await coffer.services.db.query('SELECT status FROM files WHERE project_id = $1', [
        project.id,
      ]);
      expect(files).toEqual([{ status: 'ready' }]);
      // The older write's bytes, recorded nowhere, are retired with its transaction, to be collected.
      const retired = await coffer.services.db.query('SELECT 1 FROM retired_objects WHERE project_id = $1', [
        project.id,
      ]);
      expect(retired).toHaveLength(1);
      expect((await project.call('GET', '/usage')).body.storage).toMatchObject({
        used_bytes: 'newer'.length,
        reserved_bytes: 0,
      });
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'n.txt' }));
      expect((await shownOf(bucket, 'n.txt')).listed).toEqual([]);
    });

    it(`makes a newer PutObject of a new key new content of the file an older one recorded there meanwhile (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name, project } = bucket;
      const put = (Body: string) => client.send(new PutObjectCommand({ Bucket: name, Key: 'm.txt', Body }));
      // The older write's bytes are stored and held there; the newer one then finds the key free,
      // stores its bytes, and lets the older one record its file before it records its own write.
      const { older: first, newer } = await crossing(
        () => put('older'),
        () => put('newer'),
      );
      expect(newer.ETag).toBe(`"${md5('newer')}"`);
      expect(await shownOf(bucket, 'm.txt')).toEqual({
        got: 'newer',
        listed: [['m.txt', newer.ETag]],
        versions: versioning_enabled ? [newer.VersionId, first.VersionId] : ['null'],
      });
      if (versioning_enabled) expect(newer.VersionId).not.toBe(first.VersionId);
      const files = await coffer.services.db.query('SELECT status FROM files WHERE project_id = $1', [
        project.id,
      ]);
      expect(files).toEqual([{ status: 'ready' }]);
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'm.txt' }));
      expect((await shownOf(bucket, 'm.txt')).listed).toEqual([]);
    });
    it(`merges a PutObject of a new key in its place in time: a newer write over the file there that committed first stays (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name } = bucket;
      const put = (Body: string) => client.send(new PutObjectCommand({ Bucket: name, Key: 'p.txt', Body }));
      // 'first' is held once its bytes are stored; 'second' then finds the key free and stores its
      // bytes; 'first' records its file, and 'third', begun after 'second', writes over that file.
      let third: Awaited<ReturnType<typeof put>> | undefined;
      const { older: first, newer: second } = await crossing(
        () => put('first'),
        () => put('second'),
        async () => {
          third = await put('third');
        },
      );
      expect(second.ETag).toBe(`"${md5('second')}"`);
      expect(second.VersionId).toBeUndefined();
      expect(await shownOf(bucket, 'p.txt')).toEqual({
        got: 'third',
        listed: [['p.txt', third!.ETag]],
        versions: versioning_enabled ? [third!.VersionId, first.VersionId] : ['null'],
      });
    });

    it(`keeps one file at a new key two multipart uploads of it complete, the newer one's bytes current (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name, project } = bucket;
      const completeOlder = await uploadOf(bucket, 'u.txt', 'older parts');
      const completeNewer = await uploadOf(bucket, 'u.txt', 'newer parts');
      const [olderFile, newerFile] = await coffer.services.db.query<{ id: string }>(
        'SELECT id FROM files WHERE project_id = $1 ORDER BY id',
        [project.id],
      );
      // The older upload's file is recorded first; the newer upload then becomes its new content.
      const older = await completeOlder();
      const newer = await completeNewer();
      expect(newer.ETag).toMatch(/-1"$/);
      expect(await shownOf(bucket, 'u.txt')).toEqual({
        got: 'newer parts',
        listed: [['u.txt', newer.ETag]],
        versions: versioning_enabled ? [newer.VersionId, older.VersionId] : ['null'],
      });
      if (versioning_enabled) expect(newer.VersionId).not.toBe(older.VersionId);
      expect((await project.call('GET', `/files/${olderFile!.id}`)).body).toMatchObject({
        status: 'ready',
        size_bytes: 'newer parts'.length,
      });
      expect((await project.call('GET', `/files/${newerFile!.id}`)).body).toMatchObject({
        status: 'failed',
        failure_reason: 'merged',
      });
      expect((await project.call('GET', '/usage')).body.storage).toMatchObject({
        used_bytes: 'newer parts'.length + (versioning_enabled ? 'older parts'.length : 0),
        reserved_bytes: 0,
      });
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'u.txt' }));
      expect((await shownOf(bucket, 'u.txt')).listed).toEqual([]);
    });

    it(`merges a multipart upload of a new key in its place in time: a newer write over the file there stays (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name } = bucket;
      const completeOlder = await uploadOf(bucket, 'w.txt', 'older parts');
      const completeNewer = await uploadOf(bucket, 'w.txt', 'newer parts');
      const older = await completeOlder();
      // Begun after the newer upload, over the file the older one made, and committed before it completes.
      const put = await client.send(new PutObjectCommand({ Bucket: name, Key: 'w.txt', Body: 'put' }));
      const newer = await completeNewer();
      expect(newer.VersionId).toBeUndefined();
      expect(await shownOf(bucket, 'w.txt')).toEqual({
        got: 'put',
        listed: [['w.txt', put.ETag]],
        versions: versioning_enabled ? [put.VersionId, older.VersionId] : ['null'],
      });
    });

    it(`keeps one file at a new key where the newer of two multipart uploads of it completed first (${bucketing})`, async () => {
      const bucket = await bucketWith({ versioning_enabled });
      const { client, name } = bucket;
      const completeOlder = await uploadOf(bucket, 'v.txt', 'older parts');
      const completeNewer = await uploadOf(bucket, 'v.txt', 'newer parts');
      const newer = await completeNewer();
      const older = await completeOlder();
      expect(older.VersionId).toBeUndefined();
      expect(await shownOf(bucket, 'v.txt')).toEqual({
        got: 'newer parts',
        listed: [['v.txt', newer.ETag]],
        versions: [newer.VersionId ?? 'null'],
      });
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'v.txt' }));
      expect((await shownOf(bucket, 'v.txt')).listed).toEqual([]);
    });
  }
});
