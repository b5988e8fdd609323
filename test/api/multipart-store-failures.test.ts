import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/infra/storage/object-store.ts';
import { settledChecksum } from '../support/files.ts';
import { coffer, complete, MiB, putPart, serveMultipart, start } from '../support/multipart.ts';

serveMultipart();

describe('a store call that fails while a session ends', () => {
  const sessionRow = async (uploadId: string) => {
    const [row] = await coffer.services.db.query<{
      status: string;
      storage_key: string;
      store_upload_id: string;
      store_released_at: Date | null;
    }>(
      'SELECT status, storage_key, store_upload_id, store_released_at FROM multipart_sessions WHERE id = $1',
      [uploadId],
    );
    return row!;
  };

  it('settles a complete whose store assembled the object but lost its answer', async () => {
    const project = await coffer.newProject();
    const bytes = randomBytes(1000);
    const session = await start(project, bytes.length);
    const etag = await putPart(project, session.upload_id, 1, bytes);
    const store = coffer.services.store;
    const completeMultipart = store.completeMultipart;
    store.completeMultipart = async (key, uploadId, parts) => {
      await completeMultipart.call(store, key, uploadId, parts);
      throw new StoreError('Unavailable', 'The answer of the store was lost');
    };
    let done: Awaited<ReturnType<typeof complete>>;
    try {
      done = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    } finally {
      store.completeMultipart = completeMultipart;
    }
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body).toMatchObject({ id: session.file_id, status: 'ready', size_bytes: bytes.length });
    expect((await sessionRow(session.upload_id)).status).toBe('completed');
    expect(await settledChecksum(coffer, project, session.file_id)).toBe(
      createHash('sha256').update(bytes).digest('hex'),
    );
    const download = await project.call('GET', `/files/${session.file_id}/download`);
    expect(Buffer.from(await (await fetch(download.body.url)).arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('keeps a complete completing when the store cannot even be asked, for the reaper to settle', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 3);
    const etag = await putPart(project, session.upload_id, 1, Buffer.from('abc'));
    const store = coffer.services.store;
    const { completeMultipart, head } = store;
    store.completeMultipart = () => Promise.reject(new StoreError('Unavailable', 'The store did not answer'));
    store.head = () => Promise.reject(new StoreError('Unavailable', 'The store did not answer'));
    let failed: Awaited<ReturnType<typeof complete>>;
    try {
      failed = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    } finally {
      store.completeMultipart = completeMultipart;
      store.head = head;
    }
    expect(failed.status).toBe(503);
    expect(failed.body.error.code).toBe('STORE_UNAVAILABLE');
    // Not reopened: the object might have been assembled, and another complete must not run over it.
    expect((await sessionRow(session.upload_id)).status).toBe('completing');
    expect((await project.call('GET', `/files/${session.file_id}`)).body.status).toBe('uploading');
    expect((await complete(project, session.upload_id, [{ part_number: 1, etag }])).status).toBe(409);

    // Once stuck for long, the reaper finds no object and reopens the session; complete then succeeds.
    await coffer.services.db.query(
      "UPDATE multipart_sessions SET completing_since = now() - interval '2 hours' WHERE id = $1",
      [session.upload_id],
    );
    await coffer.services.multipart.reap();
    expect((await sessionRow(session.upload_id)).status).toBe('open');
    const done = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'ready', size_bytes: 3 });
  });

  it('keeps an abort the store failed, and releases the parts on a later reap', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 5 * MiB + 1);
    await putPart(project, session.upload_id, 1, randomBytes(100));
    const store = coffer.services.store;
    const abortMultipart = store.abortMultipart;
    let failures = 0;
    store.abortMultipart = (key, uploadId) =>
      failures++ === 0
        ? Promise.reject(new StoreError('Unavailable', 'The store did not answer'))
        : abortMultipart.call(store, key, uploadId);
    try {
      const aborted = await project.call('DELETE', `/files/upload/multipart/${session.upload_id}`);
      expect(aborted.status, JSON.stringify(aborted.body)).toBe(204);
      expect(failures).toBe(1);
      expect((await project.call('GET', `/files/${session.file_id}`)).body).toMatchObject({
        status: 'failed',
        failure_reason: 'upload_aborted',
      });
      const row = await sessionRow(session.upload_id);
      expect(row).toMatchObject({ status: 'aborted', store_released_at: null });
      // The parts are still in the store, and the session cannot be aborted or completed again.
      expect(await store.listParts(row.storage_key, row.store_upload_id)).toHaveLength(1);
      expect((await project.call('DELETE', `/files/upload/multipart/${session.upload_id}`)).status).toBe(409);

      // The reaper leaves a fresh abort alone (its own call may still be under way), then retries.
      await coffer.services.multipart.reap();
      expect((await sessionRow(session.upload_id)).store_released_at).toBeNull();
      await coffer.services.db.query(
        "UPDATE multipart_sessions SET finished_at = now() - interval '2 minutes' WHERE id = $1",
        [session.upload_id],
      );
      await coffer.services.multipart.reap();
      expect((await sessionRow(session.upload_id)).store_released_at).toBeInstanceOf(Date);
      await expect(store.listParts(row.storage_key, row.store_upload_id)).rejects.toMatchObject({
        name: 'StoreError',
        code: 'NoSuchUpload',
      });
    } finally {
      store.abortMultipart = abortMultipart;
    }
  });
});
