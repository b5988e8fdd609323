import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { ADMIN_KEY, madeBeforeAll } from '../../support/coffer.ts';
import { refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

/** A version id of the form Coffer makes them in that no version has. */
const UNKNOWN = 'ver_01ARZ3NDEKTSV4RRFFQ69G5FAV';

// Deletes through the S3 endpoint, as the current AWS SDK for JavaScript sends them: of objects, of keys
// Coffer cannot hold, of one version by its id; every result is checked through Coffer's own REST API too.
const { coffer, bucketWith, auditOf } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  const bucket = madeBeforeAll(() => bucketWith());

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

  it('deletes a key Coffer cannot hold (an empty, . or .. segment) as a missing one; a held file stays an Error', async () => {
    const { client, name, project } = await bucketWith();
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'a/b', Body: 'kept', ContentType: 'text/plain' }),
    );
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'held.txt', Body: 'held', ContentType: 'text/plain' }),
    );
    const held = (await project.call('GET', '/files?q=held.txt')).body.items[0];
    await coffer.call('PUT', `/v1/projects/${project.id}/files/${held.id}/legal-hold`, {
      token: ADMIN_KEY,
      body: { reason: 'audit' },
    });
    // No object can be at such a key, so there is nothing to delete: S3 answers that as done.
    const unheld = ['a//b', '/a/b', 'a/./b', 'a/../b', 'a//'];
    const many = await client.send(
      new DeleteObjectsCommand({
        Bucket: name,
        Delete: { Objects: [...unheld, 'held.txt'].map((Key) => ({ Key })) },
      }),
    );
    expect(many.Deleted?.map((entry) => entry.Key)).toEqual(unheld);
    expect(many.Errors?.map((error) => [error.Key, error.Code])).toEqual([['held.txt', 'AccessDenied']]);
    for (const [Key, VersionId] of [
      ['a//b', undefined],
      ['/a/b', undefined],
      ['a//b', 'null'],
    ] as const) {
      const deleted = await client.send(new DeleteObjectCommand({ Bucket: name, Key, VersionId }));
      expect(deleted.$metadata.httpStatusCode).toBe(204);
    }
    // A read of such a key finds nothing, a write is refused; and nothing was deleted.
    expect(await refusal(client.send(new GetObjectCommand({ Bucket: name, Key: 'a//b' })))).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });
    expect(
      await refusal(client.send(new PutObjectCommand({ Bucket: name, Key: 'a//b', Body: 'x' }))),
    ).toEqual({
      code: 'InvalidArgument',
      status: 400,
    });
    const left = await client.send(new ListObjectsV2Command({ Bucket: name }));
    expect(left.Contents?.map((entry) => entry.Key)).toEqual(['a/b', 'held.txt']);
  });

  it('deletes one version for good by its id, keeping the object and its other versions', async () => {
    const versioned = await bucketWith({ versioning_enabled: true });
    const { client, name, project } = versioned;
    for (const body of ['v1', 'v2', 'v3']) {
      await client.send(
        new PutObjectCommand({ Bucket: name, Key: 'doc.txt', Body: body, ContentType: 'text/plain' }),
      );
    }
    const idsOf = async () =>
      ((await client.send(new ListObjectVersionsCommand({ Bucket: name }))).Versions ?? []).map(
        (version) => version.VersionId!,
      );
    const [third, second, first] = await idsOf();
    const usedBytes = async () => (await project.call('GET', '/usage')).body.storage.used_bytes;
    expect(await usedBytes()).toBe(6);

    const gone = await client.send(
      new DeleteObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: second }),
    );
    expect(gone.VersionId).toBe(second);
    expect(await idsOf()).toEqual([third, first]);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'doc.txt' }));
    expect((await text(got.Body)).toString()).toBe('v3');
    const earliest = await client.send(
      new GetObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: first }),
    );
    expect((await text(earliest.Body)).toString()).toBe('v1');
    expect(
      await refusal(client.send(new GetObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: second }))),
    ).toEqual({ code: 'NoSuchVersion', status: 404 });
    // Its bytes are no longer counted, and are collected as replaced content is.
    expect(await usedBytes()).toBe(4);
    const [file] = (await project.call('GET', '/files?q=doc.txt')).body.items;
    const retired = await coffer.services.db.query<{ storage_key: string }>(
      'SELECT storage_key FROM retired_objects WHERE project_id = $1',
      [project.id],
    );
    expect(retired).toHaveLength(1);
    const kept = (await project.call('GET', `/files/${file.id}/versions`)).body.items;
    expect(kept.map((version: { storage_key: string }) => version.storage_key)).not.toContain(
      retired[0]!.storage_key,
    );
    expect(await auditOf(project, 'file.version.delete')).toEqual([
      expect.objectContaining({
        actor_type: 's3_credential',
        targets: { file_id: file.id, version_id: second },
      }),
    ]);

    // An unknown id, and the same id again, answer NoSuchVersion. Nothing goes.
    for (const VersionId of [UNKNOWN, second!]) {
      expect(
        await refusal(client.send(new DeleteObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId }))),
      ).toEqual({ code: 'NoSuchVersion', status: 404 });
    }
    expect(await idsOf()).toEqual([third, first]);

    // DeleteObjects: each version on its own, an unknown one a per-key error.
    const many = await client.send(
      new DeleteObjectsCommand({
        Bucket: name,
        Delete: {
          Objects: [
            { Key: 'doc.txt', VersionId: first },
            { Key: 'doc.txt', VersionId: UNKNOWN },
          ],
        },
      }),
    );
    expect(many.Deleted).toEqual([{ Key: 'doc.txt', VersionId: first }]);
    expect(many.Errors?.map((error) => [error.Key, error.VersionId, error.Code])).toEqual([
      ['doc.txt', UNKNOWN, 'NoSuchVersion'],
    ]);
    expect(await idsOf()).toEqual([third]);
    expect(
      (
        await text((await client.send(new GetObjectCommand({ Bucket: name, Key: 'doc.txt' }))).Body)
      ).toString(),
    ).toBe('v3');

    // Under a legal hold no version goes.
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'doc.txt', Body: 'v4', ContentType: 'text/plain' }),
    );
    await coffer.call('PUT', `/v1/projects/${project.id}/files/${file.id}/legal-hold`, {
      token: ADMIN_KEY,
      body: { reason: 'audit' },
    });
    expect(
      await refusal(client.send(new DeleteObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: third }))),
    ).toEqual({ code: 'AccessDenied', status: 403 });
    expect(await idsOf()).toHaveLength(2);
  });

  it('deletes the null version of an unversioned object as the object, and knows no other', async () => {
    const { client, name } = await bucketWith();
    for (const Key of ['kept.txt', 'gone.txt']) {
      await client.send(new PutObjectCommand({ Bucket: name, Key, Body: 'x', ContentType: 'text/plain' }));
    }
    expect(
      await refusal(
        client.send(new DeleteObjectCommand({ Bucket: name, Key: 'kept.txt', VersionId: UNKNOWN })),
      ),
    ).toEqual({ code: 'NoSuchVersion', status: 404 });
    await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'gone.txt', VersionId: 'null' }));
    const left = await client.send(new ListObjectsV2Command({ Bucket: name }));
    expect(left.Contents?.map((entry) => entry.Key)).toEqual(['kept.txt']);
  });
});
