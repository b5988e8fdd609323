import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { ADMIN_KEY } from '../../support/coffer.ts';
import { type Bucket, refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// DeleteObject of a version by its id, as S3 does it in a versioned bucket: an earlier version goes
// for good; the current one goes and the one before it becomes current, or, the last, the object goes.
const { coffer, bucketWith, auditOf } = s3EndpointSuite();

const Key = 'doc.txt';

/** A bucket keeping versions, with `bodies` put at `Key` in turn. */
async function versioned(...bodies: string[]): Promise<Bucket & { Bucket: string }> {
  const bucket = await bucketWith({ versioning_enabled: true });
  for (const Body of bodies) {
    await bucket.client.send(
      new PutObjectCommand({ Bucket: bucket.name, Key, Body, ContentType: 'text/plain' }),
    );
  }
  return { ...bucket, Bucket: bucket.name };
}

/** What S3 shows of `Key`: its bytes (or the error), its ETag, and its versions, the latest first. */
async function shown(client: S3Client, Bucket: string) {
  const got = await client
    .send(new GetObjectCommand({ Bucket, Key }))
    .then(async (object) => (await text(object.Body)).toString())
    .catch((error: Error) => error.name);
  const listed = await client.send(new ListObjectsV2Command({ Bucket }));
  const versions = await client.send(new ListObjectVersionsCommand({ Bucket }));
  return {
    got,
    listed: (listed.Contents ?? []).map((object) => [object.Key, object.ETag, object.Size]),
    versions: (versions.Versions ?? []).map((version) => [version.VersionId, version.IsLatest, version.ETag]),
  };
}

const versionIds = async (client: S3Client, Bucket: string) =>
  ((await client.send(new ListObjectVersionsCommand({ Bucket }))).Versions ?? []).map(
    (version) => version.VersionId!,
  );

describe('deleting an object version by its id', () => {
  it('makes the version before the current one current again when the current one goes', async () => {
    const { project, Bucket, client } = await versioned('one', 'two', 'three');
    const [third, second, first] = await versionIds(client, Bucket);
    const secondHead = await client.send(new HeadObjectCommand({ Bucket, Key, VersionId: second }));

    const deleted = await client.send(new DeleteObjectCommand({ Bucket, Key, VersionId: third }));
    expect(deleted.VersionId).toBe(third);
    expect(deleted.DeleteMarker).toBeUndefined();
    expect(await shown(client, Bucket)).toEqual({
      got: 'two',
      listed: [[Key, secondHead.ETag, 3]],
      versions: [
        [second, true, secondHead.ETag],
        [first, false, expect.any(String)],
      ],
    });
    const head = await client.send(new HeadObjectCommand({ Bucket, Key }));
    expect([head.ETag, head.VersionId, head.ContentLength]).toEqual([secondHead.ETag, second, 3]);
    // The removed version's bytes no longer count, and are collected as replaced content is.
    const usage = (await project.call('GET', '/usage')).body.storage;
    expect(usage.used_bytes).toBe('one'.length + 'two'.length);
    const retired = await coffer.services.db.query('SELECT 1 FROM retired_objects WHERE project_id = $1', [
      project.id,
    ]);
    expect(retired).toHaveLength(1);
    const [file] = (await project.call('GET', '/files')).body.items;
    expect(file).toMatchObject({ size_bytes: 3, status: 'ready' });
    expect(await auditOf(project, 'file.version.delete')).toEqual([
      expect.objectContaining({
        actor_type: 's3_credential',
        targets: { file_id: file.id, version_id: third },
      }),
    ]);
  });

  it('keeps an object a restore shares in use while versions holding it go, usage exact', async () => {
    const { project, Bucket, client } = await versioned('one', 'twotwo');
    const [file] = (await project.call('GET', '/files')).body.items;
    const [, first] = await versionIds(client, Bucket);
    // The restore is a third version holding the first one's object.
    expect((await project.call('POST', `/files/${file.id}/versions/${first}/restore`)).status).toBe(200);
    const [third, second] = await versionIds(client, Bucket);
    await client.send(new DeleteObjectCommand({ Bucket, Key, VersionId: third }));
    expect(await shown(client, Bucket)).toMatchObject({ got: 'twotwo' });
    expect((await project.call('GET', '/usage')).body.storage.used_bytes).toBe(3 + 6);
    await client.send(new DeleteObjectCommand({ Bucket, Key, VersionId: second }));
    expect(await shown(client, Bucket)).toMatchObject({ got: 'one' });
    expect((await project.call('GET', '/usage')).body.storage.used_bytes).toBe(3);
    // Only the second version's object is retired: the first's is the file's again.
    const [row] = await coffer.services.db.query<{ storage_key: string }>(
      'SELECT storage_key FROM files WHERE id = $1',
      [file.id],
    );
    const retired = await coffer.services.db.query<{ storage_key: string }>(
      'SELECT storage_key FROM retired_objects WHERE project_id = $1',
      [project.id],
    );
    expect(retired.map((object) => object.storage_key)).not.toContain(row!.storage_key);
    expect(retired).toHaveLength(1);
    expect(await coffer.services.usage.reconcile()).toMatchObject({ files: 0, bytes: 0 });
  });

  it('deletes the object with its last version, and empties a bucket version by version', async () => {
    const { project, Bucket, client } = await versioned('one', 'two');
    const ids = await versionIds(client, Bucket);
    // As SDKs empty a bucket: every version ListObjectVersions names, in its order, latest first.
    const deleted = await client.send(
      new DeleteObjectsCommand({ Bucket, Delete: { Objects: ids.map((VersionId) => ({ Key, VersionId })) } }),
    );
    expect(deleted.Errors).toBeUndefined();
    expect(deleted.Deleted?.map((entry) => entry.VersionId)).toEqual(ids);
    expect(await shown(client, Bucket)).toEqual({ got: 'NoSuchKey', listed: [], versions: [] });
    expect((await project.call('GET', '/files')).body.items).toEqual([]);
  });

  it('keeps every version of an object under a legal hold', async () => {
    const { project, Bucket, client } = await versioned('one', 'two');
    const [file] = (await project.call('GET', '/files')).body.items;
    await coffer.call('PUT', `/v1/projects/${project.id}/files/${file.id}/legal-hold`, {
      token: ADMIN_KEY,
      body: { reason: 'audit' },
    });
    const [current] = await versionIds(client, Bucket);
    expect(await refusal(client.send(new DeleteObjectCommand({ Bucket, Key, VersionId: current })))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    expect(await versionIds(client, Bucket)).toHaveLength(2);
  });

  it('deletes the object as its null version where its file predates the project keeping versions', async () => {
    const { project, Bucket, client } = await versioned();
    await coffer.call('PATCH', `/v1/projects/${project.id}`, {
      token: ADMIN_KEY,
      body: { settings: { versioning_enabled: false } },
    });
    await client.send(new PutObjectCommand({ Bucket, Key, Body: 'before' }));
    await coffer.call('PATCH', `/v1/projects/${project.id}`, {
      token: ADMIN_KEY,
      body: { settings: { versioning_enabled: true } },
    });
    expect(await versionIds(client, Bucket)).toEqual(['null']);
    await client.send(new DeleteObjectCommand({ Bucket, Key, VersionId: 'null' }));
    expect(await shown(client, Bucket)).toEqual({ got: 'NoSuchKey', listed: [], versions: [] });
  });
});
