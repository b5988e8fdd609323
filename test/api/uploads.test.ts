import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const BYTES = Buffer.from('hello world');

async function initiate(project: TestProject, options: { token?: string } = {}) {
  const reply = await project.call('POST', '/files/upload', {
    ...options,
    body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: BYTES.length },
  });
  expect(reply.status).toBe(201);
  return reply.body as { file_id: string; upload_url: string };
}

const put = (url: string) =>
  fetch(url, { method: 'PUT', body: BYTES, headers: { 'content-type': 'text/plain' } });

/** The file's events in the order of their timestamps (events of the same millisecond tie). */
const eventsOf = async (fileId: string) => {
  const events = await coffer.services.db.query<{ type: string; at: string }>(
    "SELECT type, payload->>'timestamp' AS at FROM events WHERE file_id = $1",
    [fileId],
  );
  const order = ['file.uploaded', 'file.ready', 'file.deleted'];
  return events
    .sort((a, b) => a.at.localeCompare(b.at) || order.indexOf(a.type) - order.indexOf(b.type))
    .map((event) => event.type);
};

describe('two-step upload', () => {
  it('leaves no file, event or token use behind when its URL cannot be made', async () => {
    const project = await coffer.newProject();
    const token = (await project.call('POST', '/upload-tokens', { body: { max_files: 1 } })).body.token;
    const store = coffer.services.store;
    const presignPut = store.presignUpload;
    store.presignUpload = () => Promise.reject(new Error('the store is unavailable'));
    try {
      const reply = await project.call('POST', '/files/upload', {
        token,
        body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1 },
      });
      expect(reply.status).toBe(500);
    } finally {
      store.presignUpload = presignPut;
    }
    expect((await project.call('GET', '/files')).body.total).toBe(0);
    // The failed attempt did not use the token's only upload.
    await initiate(project, { token });
  });

  it('never lets a confirm racing a delete bring the deleted file back', async () => {
    const project = await coffer.newProject();
    const uploads = await Promise.all(Array.from({ length: 20 }, () => initiate(project)));
    for (const upload of uploads) expect((await put(upload.upload_url)).status).toBe(200);
    await Promise.all(
      uploads.map(async ({ file_id }) => {
        const [confirmed, deleted] = await Promise.all([
          project.call('POST', `/files/${file_id}/confirm`),
          project.call('DELETE', `/files/${file_id}`),
        ]);
        expect(deleted.status).toBe(200);
        // Either the confirm went first, or it found the file deleted.
        const events = await eventsOf(file_id);
        if (confirmed.status === 200) expect(events).toEqual(['file.uploaded', 'file.ready', 'file.deleted']);
        else {
          expect(confirmed.status).toBe(404);
          expect(events).toEqual(['file.uploaded', 'file.deleted']);
        }
      }),
    );
    const [row] = await coffer.services.db.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM files WHERE project_id = $1 AND deleted_at IS NULL',
      [project.id],
    );
    expect(row!.count).toBe(0);
  });
});

describe('legal hold and background collection', () => {
  it('keeps an abandoned upload under legal hold, and collects it once released', async () => {
    const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0', COFFER_UPLOAD_URL_TTL_SECONDS: '1' });
    try {
      const project = await quick.newProject();
      const reply = await project.call('POST', '/files/upload', {
        body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: BYTES.length },
      });
      expect((await put(reply.body.upload_url)).status).toBe(200);
      const fileId = reply.body.file_id;
      const storageKey = (await project.call('GET', `/files/${fileId}`)).body.storage_key;
      expect((await project.call('PUT', `/files/${fileId}/legal-hold`, { body: {} })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 1100));

      await quick.services.collector.sweep();
      // The unconfirmed bytes are still there (sealing them here only proves it).
      expect((await quick.services.store.seal(storageKey))?.size).toBe(BYTES.length);
      expect((await project.call('GET', `/files/${fileId}`)).body).toMatchObject({
        status: 'uploading',
        legal_hold: true,
      });

      expect((await project.call('DELETE', `/files/${fileId}/legal-hold`)).status).toBe(200);
      await quick.services.collector.sweep();
      expect(await quick.services.store.head(storageKey)).toBeUndefined();
      expect((await project.call('GET', `/files/${fileId}`)).body).toMatchObject({
        status: 'failed',
        failure_reason: 'upload_abandoned',
      });
    } finally {
      await quick.close();
    }
  });
});
