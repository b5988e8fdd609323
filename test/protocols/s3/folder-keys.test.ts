import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { backend } from '../../support/backends.ts';
import { type Bucket, md5, refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// Folder keys, zero-byte keys ending in /, through the S3 endpoint as the current AWS SDK for JavaScript
// sends them: Coffer's folders as S3 objects, listed, read and deleted, and written under conditions.
const { coffer, bucketWith } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  it('holds a PutObject of a folder key to its conditions, the marker its ETag the empty MD5', async () => {
    const { client, name } = await bucketWith();
    const put = (Key: string, conditions: { IfNoneMatch?: string; IfMatch?: string } = {}) =>
      client.send(new PutObjectCommand({ Bucket: name, Key, Body: '', ...conditions }));
    const empty = `"${md5('')}"`;

    expect((await put('dir/', { IfNoneMatch: '*' })).ETag).toBe(empty);
    expect(await refusal(put('dir/', { IfNoneMatch: '*' }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    await put('dir/', { IfMatch: empty });
    await put('dir/', { IfMatch: '*' });
    expect(await refusal(put('dir/', { IfMatch: `"${md5('other')}"` }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await refusal(put('none/', { IfMatch: empty }))).toEqual({ code: 'NoSuchKey', status: 404 });
    // A folder a key only implies is no object of its own.
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'implied/a.txt', Body: 'a' }));
    expect(await refusal(put('implied/', { IfMatch: '*' }))).toEqual({ code: 'NoSuchKey', status: 404 });
    await put('implied/', { IfNoneMatch: '*' });

    const racing = await Promise.allSettled([1, 2, 3].map(() => put('race/', { IfNoneMatch: '*' })));
    expect(racing.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
  });

  it('leaves no folder behind when a conditional PutObject of a folder key is refused', async () => {
    const { client, name, project } = await bucketWith();
    const empty = `"${md5('')}"`;
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'x/y/', Body: '' }));
    // The key, and the folder above it that it implied, are deleted between the check and the record.
    const { folders } = coffer.services;
    const markerAt = folders.markerAt;
    let pending = true;
    folders.markerAt = async (...args: Parameters<typeof markerAt>) => {
      const found = await markerAt.apply(folders, args);
      if (pending) {
        pending = false;
        for (const Key of ['x/y/', 'x/']) await client.send(new DeleteObjectCommand({ Bucket: name, Key }));
      }
      return found;
    };
    try {
      const put = client.send(new PutObjectCommand({ Bucket: name, Key: 'x/y/', Body: '', IfMatch: empty }));
      expect(await refusal(put)).toEqual({ code: 'ConditionalRequestConflict', status: 409 });
    } finally {
      folders.markerAt = markerAt;
    }
    expect(pending).toBe(false);
    expect(
      await coffer.services.db.query('SELECT path FROM folders WHERE project_id = $1', [project.id]),
    ).toEqual([]);
  });

  // The embedded database runs one transaction at a time: the races below need PostgreSQL.
  it.runIf(backend === 'postgres')(
    'orders a conditional PutObject of a folder key with a delete of it that comes in while it records',
    async () => {
      const { client, name, project } = await bucketWith();
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'x/y/', Body: '' }));
      // The key, and the folder above it that it implied, are deleted once the guard read the key again
      // in the transaction recording the write: done before it goes on, or waiting for it to commit.
      const { folders } = coffer.services;
      const markerAt = folders.markerAt;
      let deleting: Promise<void> | undefined;
      let deletedFirst = false;
      let reads = 0;
      folders.markerAt = async (...args: Parameters<typeof markerAt>) => {
        const found = await markerAt.apply(folders, args);
        if (++reads === 2) {
          deleting = (async () => {
            for (const Key of ['x/y/', 'x/'])
              await client.send(new DeleteObjectCommand({ Bucket: name, Key }));
          })();
          deletedFirst = await Promise.race([
            deleting.then(() => true),
            new Promise<boolean>((resolve) => setTimeout(resolve, 1000, false)),
          ]);
        }
        return found;
      };
      let put: { code: string; status: number | undefined } | 'ok';
      try {
        const sent = client.send(
          new PutObjectCommand({ Bucket: name, Key: 'x/y/', Body: '', IfMatch: `"${md5('')}"` }),
        );
        put = await sent.then(
          () => 'ok' as const,
          () => refusal(sent),
        );
      } finally {
        folders.markerAt = markerAt;
      }
      await deleting;
      // Deleted first: the write is refused; otherwise it was recorded first, and the delete removed it.
      expect(put).toEqual(deletedFirst ? { code: 'ConditionalRequestConflict', status: 409 } : 'ok');
      expect(
        await coffer.services.db.query('SELECT path FROM folders WHERE project_id = $1', [project.id]),
      ).toEqual([]);
    },
  );

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

  describe('folder keys, as S3 objects', () => {
    const EMPTY_MD5 = '"d41d8cd98f00b204e9800998ecf8427e"';
    const keysOf = async ({ client, name }: Bucket, Prefix?: string) =>
      ((await client.send(new ListObjectsV2Command({ Bucket: name, Prefix }))).Contents ?? []).map(
        (entry) => entry.Key!,
      );
    const folderPaths = async ({ project }: Bucket) =>
      (await project.call('GET', '/folders')).body.items.map((folder: { path: string }) => folder.path);

    it('answers HEAD and GET of a folder key it was given: no bytes, the empty MD5 as ETag', async () => {
      const b = await bucketWith();
      const { client, name } = b;
      const put = await client.send(new PutObjectCommand({ Bucket: name, Key: 'made/', Body: '' }));
      expect(put.ETag).toBe(EMPTY_MD5);
      const head = await client.send(new HeadObjectCommand({ Bucket: name, Key: 'made/' }));
      expect(head).toMatchObject({ ContentLength: 0, ETag: EMPTY_MD5 });
      const listed = await client.send(new ListObjectsV2Command({ Bucket: name }));
      expect(listed.Contents?.map((entry) => [entry.Key, entry.ETag, entry.Size])).toEqual([
        ['made/', EMPTY_MD5, 0],
      ]);
      // Last-Modified in whole seconds, as listed.
      expect(head.LastModified?.getTime()).toBe(
        Math.floor(listed.Contents![0]!.LastModified!.getTime() / 1000) * 1000,
      );
      const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'made/' }));
      expect(got.ETag).toBe(EMPTY_MD5);
      expect((await text(got.Body)).length).toBe(0);
      const versions = await client.send(new ListObjectVersionsCommand({ Bucket: name }));
      expect(versions.Versions?.map((v) => [v.Key, v.VersionId, v.Size, v.IsLatest])).toEqual([
        ['made/', 'null', 0, true],
      ]);
      // A folder only a key's path implies is no object.
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'implied/f.txt', Body: 'f' }));
      expect(await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key: 'implied/' })))).toEqual({
        code: 'NotFound',
        status: 404,
      });
      expect(await refusal(client.send(new GetObjectCommand({ Bucket: name, Key: 'implied/' })))).toEqual({
        code: 'NoSuchKey',
        status: 404,
      });
      // A PUT of it makes it one, which stays once the folder holds a key, and is listed once emptied.
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'implied/', Body: '' }));
      await client.send(new HeadObjectCommand({ Bucket: name, Key: 'implied/' }));
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'made/g.txt', Body: 'g' }));
      await client.send(new HeadObjectCommand({ Bucket: name, Key: 'made/' }));
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'implied/f.txt' }));
      expect(await keysOf(b)).toEqual(['implied/', 'made/g.txt']);
    });

    it('shows no folder key that a deleted key only implied', async () => {
      const b = await bucketWith();
      const { client, name } = b;
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'e1/e2/e3/f.txt', Body: 'f' }));
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'e1/e2/e3/f.txt' }));
      expect(await keysOf(b)).toEqual([]);
      expect((await client.send(new ListObjectVersionsCommand({ Bucket: name }))).Versions ?? []).toEqual([]);
      // They stay folders in Coffer.
      expect(await folderPaths(b)).toEqual(['e1']);
      expect(await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key: 'e1/e2/e3/' })))).toEqual({
        code: 'NotFound',
        status: 404,
      });
    });

    it('empties a prefix in one round of listing and deleting what was listed', async () => {
      const b = await bucketWith();
      const { client, name } = b;
      for (const Key of ['p/a.txt', 'p/q/b.txt', 'p/q/r/s/c.txt', 'p/t/u/d.txt', 'other.txt']) {
        await client.send(new PutObjectCommand({ Bucket: name, Key, Body: Key }));
      }
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'p/empty/', Body: '' }));
      const listed = await keysOf(b, 'p/');
      expect(listed).toEqual(['p/a.txt', 'p/empty/', 'p/q/b.txt', 'p/q/r/s/c.txt', 'p/t/u/d.txt']);
      const deleted = await client.send(
        new DeleteObjectsCommand({ Bucket: name, Delete: { Objects: listed.map((Key) => ({ Key })) } }),
      );
      expect(deleted.Errors ?? []).toEqual([]);
      expect(await keysOf(b, 'p/')).toEqual([]);
      expect(await keysOf(b)).toEqual(['other.txt']);
    });

    it('deletes a folder key: the folder when empty, else only the key, its keys kept', async () => {
      const b = await bucketWith();
      const { client, name } = b;
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'm/', Body: '' }));
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'm/a.txt', Body: 'a' }));
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'gone/', Body: '' }));
      const answers: number[] = [];
      for (const Key of ['m/', 'gone/', 'never/']) {
        const deleted = await client.send(new DeleteObjectCommand({ Bucket: name, Key }));
        answers.push(deleted.$metadata.httpStatusCode!);
      }
      expect(answers).toEqual([204, 204, 204]);
      expect(await keysOf(b)).toEqual(['m/a.txt']);
      const kept = await client.send(new GetObjectCommand({ Bucket: name, Key: 'm/a.txt' }));
      expect((await text(kept.Body)).toString()).toBe('a');
      expect(await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key: 'm/' })))).toMatchObject({
        status: 404,
      });
      expect(await folderPaths(b)).toEqual(['m']);
      // No key of its own any more: emptied, it is not listed.
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'm/a.txt' }));
      expect(await keysOf(b)).toEqual([]);
    });

    it('deletes a folder key by its one version, "null", where the bucket keeps versions', async () => {
      const b = await bucketWith({ versioning_enabled: true });
      const { client, name } = b;
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'v/', Body: '' }));
      const versions = await client.send(new ListObjectVersionsCommand({ Bucket: name }));
      expect(versions.Versions?.map((v) => [v.Key, v.VersionId])).toEqual([['v/', 'null']]);
      expect(
        await refusal(
          client.send(
            new DeleteObjectCommand({ Bucket: name, Key: 'v/', VersionId: 'ver_01ARZ3NDEKTSV4RRFFQ69G5FAV' }),
          ),
        ),
      ).toMatchObject({ code: 'NoSuchVersion', status: 404 });
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'v/', VersionId: 'null' }));
      expect(await keysOf(b)).toEqual([]);
      expect(await folderPaths(b)).toEqual([]);
    });

    it('lists folders made through the REST API as before: the empty ones, as keys', async () => {
      const b = await bucketWith();
      const { client, name, project } = b;
      const made = async (folder: string, parent_id?: string) =>
        (await project.call('POST', '/folders', { body: { name: folder, parent_id } })).body.id as string;
      const rest = await made('rest');
      await made('inner', rest);
      await made('other');
      await made('full');
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'full/f.txt', Body: 'f' }));
      expect(await keysOf(b)).toEqual(['full/f.txt', 'other/', 'rest/inner/']);
      await client.send(new HeadObjectCommand({ Bucket: name, Key: 'rest/' }));
      await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'full/f.txt' }));
      expect(await keysOf(b)).toEqual(['full/', 'other/', 'rest/inner/']);
    });
  });
});
