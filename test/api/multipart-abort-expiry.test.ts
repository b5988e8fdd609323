import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isStoreError } from '../../src/infra/storage/object-store.ts';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';
import { settledChecksum } from '../support/files.ts';
import { coffer, complete, MiB, putPart, serveMultipart, start } from '../support/multipart.ts';

serveMultipart();

/** Whether the store still holds the session's upload (its parts); false once aborted or completed. */
async function storeHoldsParts(from: TestCoffer, uploadId: string): Promise<boolean> {
  const [session] = await from.services.db.query<{ storage_key: string; store_upload_id: string }>(
    'SELECT storage_key, store_upload_id FROM multipart_sessions WHERE id = $1',
    [uploadId],
  );
  return from.services.store.listParts(session!.storage_key, session!.store_upload_id).then(
    () => true,
    (error: unknown) => (isStoreError(error, 'NoSuchUpload') ? false : Promise.reject(error)),
  );
}

const eventTypes = async (fileId: string) =>
  (
    await coffer.services.db.query<{ type: string }>(
      'SELECT type FROM events WHERE file_id = $1 ORDER BY created_at, id',
      [fileId],
    )
  ).map((event) => event.type);

describe('multipart upload', () => {
  it('aborts mid-way: parts discarded, file failed, 204; a second abort is 409', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 5 * MiB + 1);
    const url = (
      await project.call('GET', `/files/upload/multipart/${session.upload_id}/part-url?part=1&size=100`)
    ).body.url;
    await fetch(url, { method: 'PUT', body: randomBytes(100) });
    expect(await storeHoldsParts(coffer, session.upload_id)).toBe(true);
    const aborted = await project.call('DELETE', `/files/upload/multipart/${session.upload_id}`);
    expect(aborted.status).toBe(204);
    expect((await project.call('GET', `/files/${session.file_id}`)).body).toMatchObject({ status: 'failed' });
    expect(await storeHoldsParts(coffer, session.upload_id)).toBe(false);
    const late = await fetch(url, { method: 'PUT', body: randomBytes(100) });
    expect(late.status).toBe(404);
    const again = await project.call('DELETE', `/files/upload/multipart/${session.upload_id}`);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('INVALID_STATE');
    const completeAfter = await complete(project, session.upload_id, [{ part_number: 1, etag: '"x"' }]);
    expect(completeAfter.status).toBe(409);
  });

  it('grants no part to an upload aborted after it was read open', async () => {
    const project = await coffer.newProject();
    const { upload_id } = await start(project, 2 * MiB);
    const { db } = coffer.services;
    const tx = db.tx;
    // The abort lands between the request's read of the session and the grant's lock of it.
    db.tx = (async (work: Parameters<typeof db.tx>[0]) => {
      db.tx = tx;
      await db.query("UPDATE multipart_sessions SET status = 'aborted' WHERE id = $1", [upload_id]);
      return tx.call(db, work);
    }) as typeof db.tx;
    try {
      const url = await project.call(
        'GET',
        `/files/upload/multipart/${upload_id}/part-url?part=1&size=${MiB}`,
      );
      expect(url.status).toBe(409);
      expect(url.body.error.code).toBe('INVALID_STATE');
    } finally {
      db.tx = tx;
    }
    const [session] = await db.query('SELECT part_grants FROM multipart_sessions WHERE id = $1', [upload_id]);
    expect(session).toEqual({ part_grants: {} });
  });

  it('reaps sessions open past COFFER_MULTIPART_EXPIRY_SECONDS', async () => {
    const quick = await startCoffer({ COFFER_MULTIPART_EXPIRY_SECONDS: '1' });
    try {
      const project = await quick.newProject();
      const reply = await project.call('POST', '/files/upload/multipart/start', {
        body: { filename: 'a.bin', content_type: 'application/octet-stream', total_size_bytes: 10 },
      });
      const url = (
        await project.call('GET', `/files/upload/multipart/${reply.body.upload_id}/part-url?part=1&size=10`)
      ).body.url;
      expect((await fetch(url, { method: 'PUT', body: randomBytes(10) })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect(await quick.services.multipart.reap()).toBeGreaterThanOrEqual(1);
      expect((await project.call('GET', `/files/${reply.body.file_id}`)).body.status).toBe('failed');
      expect(await storeHoldsParts(quick, reply.body.upload_id)).toBe(false);
      const listed = await project.call('GET', `/files/upload/multipart/${reply.body.upload_id}`);
      expect(listed.body.status).toBe('expired');
    } finally {
      await quick.close();
    }
  });
});

describe('expiry', () => {
  it('refuses part URLs and complete once expired, before the reaper ran; keeps a held file', async () => {
    const quick = await startCoffer({ COFFER_MULTIPART_EXPIRY_SECONDS: '1' });
    try {
      const project = await quick.newProject();
      const started = await project.call('POST', '/files/upload/multipart/start', {
        body: { filename: 'a.bin', content_type: 'application/octet-stream', total_size_bytes: 3 },
      });
      const { upload_id: uploadId, file_id: fileId } = started.body;
      const url = (await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=1&size=3`))
        .body.url;
      const put = await fetch(url, { method: 'PUT', body: Buffer.from('abc') });
      const etag = put.headers.get('etag')!;
      expect((await project.call('PUT', `/files/${fileId}/legal-hold`, { body: {} })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 1100));

      const partUrl = await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=2`);
      expect(partUrl.status).toBe(409);
      expect(partUrl.body.error).toMatchObject({ code: 'INVALID_STATE', details: { status: 'expired' } });
      expect((await complete(project, uploadId, [{ part_number: 1, etag }])).status).toBe(409);

      // Under legal hold, the reaper leaves the parts alone; once released, it aborts the session.
      await quick.services.multipart.reap();
      expect((await project.call('GET', `/files/upload/multipart/${uploadId}`)).body.parts).toHaveLength(1);
      expect((await project.call('DELETE', `/files/${fileId}/legal-hold`)).status).toBe(200);
      expect(await quick.services.multipart.reap()).toBe(1);
      expect((await project.call('GET', `/files/${fileId}`)).body.status).toBe('failed');
      expect((await project.call('GET', `/files/upload/multipart/${uploadId}`)).body.status).toBe('expired');
    } finally {
      await quick.close();
    }
  });
});

describe('a session left completing by a process that died', () => {
  const stall = (uploadId: string) =>
    coffer.services.db.query(
      "UPDATE multipart_sessions SET status = 'completing', completing_since = now() - interval '2 hours' WHERE id = $1",
      [uploadId],
    );

  /** Stores the object of the session's single part, as a process that died before recording it did. */
  const assembleAsACrashedProcessDid = async (uploadId: string, etag: string) => {
    const [row] = await coffer.services.db.query<{ storage_key: string; store_upload_id: string }>(
      'SELECT storage_key, store_upload_id FROM multipart_sessions WHERE id = $1',
      [uploadId],
    );
    await coffer.services.store.completeMultipart(row!.storage_key, row!.store_upload_id, [
      { partNumber: 1, etag },
    ]);
  };

  it('is reopened when its object was never assembled', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 3);
    const etag = await putPart(project, session.upload_id, 1, Buffer.from('abc'));
    await stall(session.upload_id);
    expect((await complete(project, session.upload_id, [{ part_number: 1, etag }])).status).toBe(409);
    await coffer.services.multipart.reap();
    const done = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.status).toBe(200);
    expect(done.body.status).toBe('ready');
  });

  it('is finished when its object was stored, as complete would have done', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 3);
    const etag = await putPart(project, session.upload_id, 1, Buffer.from('abc'));
    await assembleAsACrashedProcessDid(session.upload_id, etag);
    await stall(session.upload_id);
    await coffer.services.multipart.reap();
    const file = await project.call('GET', `/files/${session.file_id}`);
    expect(file.body.status).toBe('ready');
    expect(await settledChecksum(coffer, project, session.file_id)).toBe(
      createHash('sha256').update('abc').digest('hex'),
    );
    const listed = await project.call('GET', `/files/upload/multipart/${session.upload_id}`);
    expect(listed.body.status).toBe('completed');
  });

  it('is aborted when its file was deleted meanwhile, without holding back the others', async () => {
    const project = await coffer.newProject();
    const deleted = await start(project, 3);
    const deletedEtag = await putPart(project, deleted.upload_id, 1, Buffer.from('abc'));
    await assembleAsACrashedProcessDid(deleted.upload_id, deletedEtag);
    expect((await project.call('DELETE', `/files/${deleted.file_id}`)).status).toBe(200);
    await stall(deleted.upload_id);
    const other = await start(project, 3);
    await putPart(project, other.upload_id, 1, Buffer.from('abc'));
    await stall(other.upload_id);

    await coffer.services.multipart.reap();
    const sessions = await coffer.services.db.query<{ id: string; status: string }>(
      'SELECT id, status FROM multipart_sessions WHERE id = ANY($1::text[]) ORDER BY id',
      [[deleted.upload_id, other.upload_id]],
    );
    expect(sessions).toEqual([
      { id: deleted.upload_id, status: 'aborted' },
      { id: other.upload_id, status: 'open' },
    ]);
    expect(await eventTypes(deleted.file_id)).toEqual(['file.uploaded', 'file.deleted']);
  });
});
