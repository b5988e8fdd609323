import { setTimeout as sleep } from 'node:timers/promises';
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

describe('the store side of an upload, made before its transaction', () => {
  const body = { filename: 'a.txt', content_type: 'text/plain', size_bytes: BYTES.length };
  /** Well-formed, but no folder of the project: refused in the transaction (422). */
  const NOT_A_FOLDER = 'fld_01ARZ3NDEKTSV4RRFFQ69G5FAV';

  /** A project, and an upload token that has already made its only upload: refused in the transaction (403). */
  async function projectWithSpentToken() {
    const project = await coffer.newProject();
    const token = (await project.call('POST', '/upload-tokens', { body: { max_files: 1 } })).body.token;
    await initiate(project, { token });
    return { project, token: token as string };
  }

  /** Both refusals of `path`: a folder_id that is not a folder, and a token past max_files. */
  async function refuse(project: TestProject, token: string, path: string, request: Record<string, unknown>) {
    const notAFolder = await project.call('POST', path, { body: { ...request, folder_id: NOT_A_FOLDER } });
    expect(notAFolder.status).toBe(422);
    expect(notAFolder.body.error.details.field).toBe('folder_id');
    const spent = await project.call('POST', path, { token, body: request });
    expect(spent.status).toBe(403);
    expect(spent.body.error.code).toBe('TOKEN_LIMIT_REACHED');
  }

  it('is undone when the transaction refuses an initiate', async () => {
    const { project, token } = await projectWithSpentToken();
    const store = coffer.services.store;
    const { presignUpload, delete: remove } = store;
    const presigned: string[] = [];
    const deleted: string[] = [];
    store.presignUpload = (key, options) => {
      presigned.push(key);
      return presignUpload.call(store, key, options);
    };
    store.delete = (key) => {
      deleted.push(key);
      return remove.call(store, key);
    };
    try {
      await refuse(project, token, '/files/upload', body);
    } finally {
      store.presignUpload = presignUpload;
      store.delete = remove;
    }
    expect(presigned).toHaveLength(2);
    expect(deleted).toEqual(presigned);
    expect((await project.call('GET', '/files')).body.total).toBe(1);
  });

  it('is undone when the transaction refuses a multipart start', async () => {
    const { project, token } = await projectWithSpentToken();
    const store = coffer.services.store;
    const { createMultipart, abortMultipart } = store;
    const created: { key: string; uploadId: string }[] = [];
    const aborted: { key: string; uploadId: string }[] = [];
    store.createMultipart = async (key, options) => {
      const uploadId = await createMultipart.call(store, key, options);
      created.push({ key, uploadId });
      return uploadId;
    };
    store.abortMultipart = (key, uploadId) => {
      aborted.push({ key, uploadId });
      return abortMultipart.call(store, key, uploadId);
    };
    try {
      await refuse(project, token, '/files/upload/multipart/start', {
        filename: 'a.bin',
        content_type: 'application/octet-stream',
        total_size_bytes: 10,
      });
    } finally {
      store.createMultipart = createMultipart;
      store.abortMultipart = abortMultipart;
    }
    expect(created).toHaveLength(2);
    expect(aborted).toEqual(created);
    for (const { key, uploadId } of created) {
      await expect(store.listParts(key, uploadId)).rejects.toMatchObject({
        name: 'StoreError',
        code: 'NoSuchUpload',
      });
    }
    expect(
      await coffer.services.db.query('SELECT id FROM multipart_sessions WHERE project_id = $1', [project.id]),
    ).toEqual([]);
  });

  it('holds no database connection while the store is slow', async () => {
    // More than the connections of a PostgreSQL pool (20); on PGlite, one transaction would be enough.
    const HANGING = 25;
    const project = await coffer.newProject();
    const store = coffer.services.store;
    const { presignUpload } = store;
    let resume!: () => void;
    const resumed = new Promise<void>((resolve) => {
      resume = resolve;
    });
    let waiting = 0;
    store.presignUpload = async (key, options) => {
      waiting++;
      await resumed;
      return presignUpload.call(store, key, options);
    };
    let initiates: Promise<number>[] = [];
    try {
      initiates = Array.from({ length: HANGING }, () =>
        project.call('POST', '/files/upload', { body }).then((reply) => reply.status),
      );
      const deadline = Date.now() + 1000;
      while (waiting < HANGING && Date.now() < deadline) await sleep(10);
      const listed = await fetch(`${coffer.url}/v1/projects/${project.id}/files`, {
        headers: { authorization: `Bearer ${project.key}` },
        signal: AbortSignal.timeout(2000),
      }).then(
        (response) => response.status,
        (error: Error) => `no answer: ${error.message}`,
      );
      expect(listed).toBe(200);
      expect(waiting).toBe(HANGING);
    } finally {
      resume();
      store.presignUpload = presignUpload;
    }
    expect(await Promise.all(initiates)).toEqual(Array(HANGING).fill(201));
    expect((await project.call('GET', '/files?limit=100')).body.total).toBe(HANGING);
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
