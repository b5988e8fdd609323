import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { isStoreError, type ObjectStore } from '../../src/infra/storage/object-store.ts';
import { newId } from '../../src/lib/ids.ts';
import { newObjectKey } from '../../src/modules/ingest/rules.ts';
import { startCoffer } from '../support/coffer.ts';

const PART = Buffer.from('0123456789');

/** Starts an upload in the store alone, as a process killed before recording it leaves one, with a part. */
async function storeUpload(store: ObjectStore, key: string) {
  const uploadId = await store.createMultipart(key, { contentType: 'text/plain', totalSize: PART.length });
  const url = await store.presignPart(key, uploadId, 1, {
    expiresAt: new Date(Date.now() + 60_000),
    size: PART.length,
  });
  expect((await fetch(url, { method: 'PUT', body: PART })).status).toBe(200);
  return uploadId;
}

const holdsParts = (store: ObjectStore, key: string, uploadId: string) =>
  store.listParts(key, uploadId).then(
    (parts) => parts.length > 0,
    (error: unknown) => (isStoreError(error, 'NoSuchUpload') ? false : Promise.reject(error)),
  );

describe('collection of what unfinished uploads left in the store', () => {
  it('removes store uploads nothing records, and keeps open sessions and keys of other projects', async () => {
    const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0', COFFER_UPLOAD_URL_TTL_SECONDS: '1' });
    const { store } = quick.services;
    try {
      const project = await quick.newProject();
      const started = await project.call('POST', '/files/upload/multipart/start', {
        body: { filename: 'open.txt', content_type: 'text/plain', total_size_bytes: PART.length },
      });
      expect(started.status).toBe(201);
      const partUrl = await project.call(
        'GET',
        `/files/upload/multipart/${started.body.upload_id}/part-url?part=1&size=${PART.length}`,
      );
      const sent = await fetch(partUrl.body.url, { method: 'PUT', body: PART });
      expect(sent.status).toBe(200);

      const orphanKey = newObjectKey(project.id, newId('file'));
      const orphan = await storeUpload(store, orphanKey);
      // A project this database does not know: another deployment's upload in a shared bucket.
      const foreignKey = newObjectKey(newId('proj'), newId('file'));
      const foreign = await storeUpload(store, foreignKey);
      await sleep(1100); // past the upload URL lifetime (plus no grace)

      expect((await quick.services.collector.sweep()).stale).toBeGreaterThanOrEqual(1);
      expect(await holdsParts(store, orphanKey, orphan)).toBe(false);
      expect(await holdsParts(store, foreignKey, foreign)).toBe(true);
      // The open session goes on as if nothing happened.
      const completed = await project.call(
        'POST',
        `/files/upload/multipart/${started.body.upload_id}/complete`,
        { body: { parts: [{ part_number: 1, etag: sent.headers.get('etag') }] } },
      );
      expect(completed.status, JSON.stringify(completed.body)).toBe(200);
      expect(completed.body.size_bytes).toBe(PART.length);
      await store.abortMultipart(foreignKey, foreign);
    } finally {
      await quick.close();
    }
  });
});
