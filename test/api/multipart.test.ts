import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreError, StoreError } from '../../src/infra/storage/object-store.ts';
import { findFile } from '../../src/modules/files/repo.ts';
import { findSession, findSessionAndFile } from '../../src/modules/uploads/session-repo.ts';
import { storage } from '../support/backends.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { settledChecksum } from '../support/files.ts';

const MiB = 1024 * 1024;
let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const md5 = (bytes: Buffer) => `"${createHash('md5').update(bytes).digest('hex')}"`;

async function start(project: TestProject, total: number, extra: Record<string, unknown> = {}) {
  const reply = await project.call('POST', '/files/upload/multipart/start', {
    body: {
      filename: 'big.bin',
      content_type: 'application/octet-stream',
      total_size_bytes: total,
      ...extra,
    },
  });
  expect(reply.status).toBe(201);
  return reply.body as { upload_id: string; file_id: string };
}

async function putPart(project: TestProject, uploadId: string, partNumber: number, bytes: Buffer) {
  const url = await project.call(
    'GET',
    `/files/upload/multipart/${uploadId}/part-url?part=${partNumber}&size=${bytes.length}`,
  );
  expect(url.status).toBe(200);
  const reply = await fetch(url.body.url, { method: 'PUT', body: bytes });
  expect(reply.status).toBe(200);
  return reply.headers.get('etag')!;
}

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

const complete = (project: TestProject, uploadId: string, parts: { part_number: number; etag: string }[]) =>
  project.call('POST', `/files/upload/multipart/${uploadId}/complete`, { body: { parts } });

describe('multipart upload', () => {
  it('assembles parts uploaded out of order into the exact bytes and makes the file ready', async () => {
    const project = await coffer.newProject();
    const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(1000)];
    const whole = Buffer.concat(parts);
    const session = await start(project, whole.length);
    expect(session.upload_id).toMatch(/^session_[0-9A-Z]{26}$/);
    expect((await project.call('GET', `/files/${session.file_id}`)).body.status).toBe('uploading');
    const events = await coffer.services.db.query('SELECT type FROM events WHERE file_id = $1', [
      session.file_id,
    ]);
    expect(events).toEqual([{ type: 'file.uploaded' }]);

    const etags: string[] = [];
    for (const n of [3, 1, 2]) etags[n - 1] = await putPart(project, session.upload_id, n, parts[n - 1]!);
    expect(etags).toEqual(parts.map(md5));

    const done = await complete(
      project,
      session.upload_id,
      etags.map((etag, i) => ({ part_number: i + 1, etag })),
    );
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ id: session.file_id, status: 'ready', size_bytes: whole.length });
    expect(await settledChecksum(coffer, project, session.file_id)).toBe(
      createHash('sha256').update(whole).digest('hex'),
    );
    const download = await project.call('GET', `/files/${session.file_id}/download`);
    const bytes = Buffer.from(await (await fetch(download.body.url)).arrayBuffer());
    expect(bytes.equals(whole)).toBe(true);

    const again = await complete(
      project,
      session.upload_id,
      etags.map((etag, i) => ({ part_number: i + 1, etag })),
    );
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('INVALID_STATE');
    const partUrl = await project.call('GET', `/files/upload/multipart/${session.upload_id}/part-url?part=1`);
    expect(partUrl.status).toBe(409);
    expect(partUrl.body.error.code).toBe('INVALID_STATE');
  });

  it('replaces a part uploaded again', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 4);
    await putPart(project, session.upload_id, 1, Buffer.from('old!'));
    const etag = await putPart(project, session.upload_id, 1, Buffer.from('new!'));
    const listed = await project.call('GET', `/files/upload/multipart/${session.upload_id}`);
    expect(listed.body.parts).toEqual([{ part_number: 1, etag, size_bytes: 4 }]);
    const done = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.status).toBe(200);
    const download = await project.call('GET', `/files/${session.file_id}/download`);
    expect(await (await fetch(download.body.url)).text()).toBe('new!');
  });

  it('resumes after a simulated crash: lists what is stored and sends only the rest', async () => {
    const project = await coffer.newProject();
    const parts = [randomBytes(5 * MiB), randomBytes(10)];
    const session = await start(project, 5 * MiB + 10);
    await putPart(project, session.upload_id, 1, parts[0]!);
    // The client crashes here and forgets every ETag; a new client asks what is there.
    const listed = await project.call('GET', `/files/upload/multipart/${session.upload_id}`);
    expect(listed.status).toBe(200);
    expect(listed.body).toMatchObject({
      upload_id: session.upload_id,
      file_id: session.file_id,
      status: 'open',
    });
    expect(listed.body.parts).toEqual([{ part_number: 1, etag: md5(parts[0]!), size_bytes: 5 * MiB }]);
    const second = await putPart(project, session.upload_id, 2, parts[1]!);
    const done = await complete(project, session.upload_id, [
      { part_number: 1, etag: listed.body.parts[0].etag },
      { part_number: 2, etag: second.replaceAll('"', '') },
    ]);
    expect(done.status).toBe(200);
    expect(await settledChecksum(coffer, project, session.file_id)).toBe(
      createHash('sha256').update(Buffer.concat(parts)).digest('hex'),
    );
  });

  describe('complete refuses, naming the part, and changes nothing', () => {
    let project: TestProject;
    let session: { upload_id: string; file_id: string };
    let etags: string[];
    beforeAll(async () => {
      project = await coffer.newProject();
      session = await start(project, 5 * MiB + 2000);
      etags = [
        await putPart(project, session.upload_id, 1, randomBytes(1000)),
        await putPart(project, session.upload_id, 2, randomBytes(5 * MiB)),
        await putPart(project, session.upload_id, 3, randomBytes(1000)),
      ];
    });

    it.each([
      ['a wrong ETag', () => [{ part_number: 2, etag: '"0123"' }], 'parts.0'],
      ['a too-small middle part', () => etags.map((etag, i) => ({ part_number: i + 1, etag })), 'parts.0'],
      [
        'descending parts',
        () => [
          { part_number: 2, etag: etags[1]! },
          { part_number: 1, etag: etags[0]! },
        ],
        'parts.1',
      ],
      [
        'a repeated part',
        () => [
          { part_number: 2, etag: etags[1]! },
          { part_number: 2, etag: etags[1]! },
        ],
        'parts.1',
      ],
      ['a part never uploaded', () => [{ part_number: 7, etag: '"x"' }], 'parts.0'],
      ['a total that does not match', () => [{ part_number: 2, etag: etags[1]! }], 'parts'],
      ['no parts', () => [], 'parts'],
    ])('%s', async (_what, parts, field) => {
      const reply = await complete(project, session.upload_id, parts());
      expect(reply.status).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
      expect((await project.call('GET', `/files/${session.file_id}`)).body.status).toBe('uploading');
    });

    it('completes once the list is right', async () => {
      const reply = await complete(project, session.upload_id, [
        { part_number: 2, etag: etags[1]! },
        { part_number: 3, etag: etags[2]! },
      ]);
      expect(reply.status).toBe(422);
      expect(reply.body.error.details.field).toBe('parts');
      const fixed = await putPart(project, session.upload_id, 3, randomBytes(2000));
      const ok = await complete(project, session.upload_id, [
        { part_number: 2, etag: etags[1]! },
        { part_number: 3, etag: fixed },
      ]);
      // Completing some of the uploaded parts (part 1 is left out) is S3's rule; radosgw 16, the S3
      // server of the tests, refuses it with InvalidPart (a clear 422, nothing changed).
      expect(ok.status).toBe(storage === 's3' ? 422 : 200);
    });
  });

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

  it('checks part numbers and TTLs', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 10);
    for (const query of ['part=x', '', 'part=1.5', 'part=1&ttl=soon']) {
      const reply = await project.call(
        'GET',
        `/files/upload/multipart/${session.upload_id}/part-url?${query}`,
      );
      expect(reply.status, query).toBe(400);
      expect(reply.body.error.code).toBe('BAD_REQUEST');
    }
    // A readable part number outside 1..10000 breaks a rule: 422 naming the field.
    for (const query of ['part=0', 'part=-1', 'part=10001']) {
      const reply = await project.call(
        'GET',
        `/files/upload/multipart/${session.upload_id}/part-url?${query}&size=1`,
      );
      expect(reply.status, query).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'part' } });
    }
    for (const query of ['part=1&ttl=59', 'part=1&ttl=86401']) {
      const reply = await project.call(
        'GET',
        `/files/upload/multipart/${session.upload_id}/part-url?${query}&size=1`,
      );
      expect(reply.status, query).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'ttl' } });
    }
    const reply = await project.call(
      'GET',
      `/files/upload/multipart/${session.upload_id}/part-url?part=10000&ttl=120&size=1`,
    );
    expect(reply.body.part_number).toBe(10000);
    expect(Math.round((new Date(reply.body.expires_at).getTime() - Date.now()) / 1000)).toBe(120);

    const strict = await coffer.newProject({ require_signed_urls: true });
    const strictSession = await start(strict, 10);
    for (const ttl of ['120', '30']) {
      const ignored = await strict.call(
        'GET',
        `/files/upload/multipart/${strictSession.upload_id}/part-url?part=1&ttl=${ttl}&size=1`,
      );
      expect(ignored.status).toBe(200);
      expect(Math.round((new Date(ignored.body.expires_at).getTime() - Date.now()) / 1000)).toBe(
        coffer.config.uploadUrlTtlSeconds,
      );
    }
  });

  it('applies the project checks to total_size_bytes and goes to processing when scanning', async () => {
    const small = await coffer.newProject({ max_file_size_bytes: 100 });
    const tooBig = await small.call('POST', '/files/upload/multipart/start', {
      body: { filename: 'a.bin', content_type: 'application/octet-stream', total_size_bytes: 101 },
    });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error).toMatchObject({
      code: 'FILE_TOO_LARGE',
      details: { field: 'total_size_bytes' },
    });
    const images = await coffer.newProject({ allowed_mime_types: 'image/*' });
    const wrongType = await images.call('POST', '/files/upload/multipart/start', {
      body: { filename: 'a.bin', content_type: 'application/octet-stream', total_size_bytes: 1 },
    });
    expect(wrongType.status).toBe(422);

    const scanning = await coffer.newProject({ virus_scan_enabled: true });
    const session = await start(scanning, 3);
    const etag = await putPart(scanning, session.upload_id, 1, Buffer.from('abc'));
    const done = await complete(scanning, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.body.status).toBe('processing');
  });

  it('is invisible to other projects', async () => {
    const a = await coffer.newProject();
    const b = await coffer.newProject();
    const session = await start(a, 10);
    const reply = await b.call('GET', `/files/upload/multipart/${session.upload_id}`);
    expect(reply.status).toBe(404);
    expect((await a.call('GET', '/files/upload/multipart/session_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status).toBe(
      404,
    );
  });

  it('is completed, never confirmed: confirm answers 409 naming the upload', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 3);
    const etag = await putPart(project, session.upload_id, 1, Buffer.from('abc'));
    const confirmed = await project.call('POST', `/files/${session.file_id}/confirm`);
    expect(confirmed.status).toBe(409);
    expect(confirmed.body.error).toMatchObject({
      code: 'INVALID_STATE',
      details: { upload_id: session.upload_id },
    });
    const done = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.status).toBe(200);
    expect(done.body.status).toBe('ready');
  });

  it('cannot complete the upload of a deleted file', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 3);
    const etag = await putPart(project, session.upload_id, 1, Buffer.from('abc'));
    expect((await project.call('DELETE', `/files/${session.file_id}`)).status).toBe(200);
    const done = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.status).toBe(404);
  });

  it('loads a session with its file in one query as each is read alone', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 3);
    const { db } = coffer.services;
    const alone = {
      session: await findSession(db, project.id, session.upload_id),
      file: await findFile(db, project.id, session.file_id),
    };
    expect(alone.session?.expires_at).toBeInstanceOf(Date);
    // With the key S3 shows its file at (the file's name, at the top of the bucket).
    expect(await findSessionAndFile(db, project.id, session.upload_id)).toEqual({
      ...alone,
      key: alone.file?.filename,
    });
    expect(await findSessionAndFile(db, project.id, 'session_01J00000000000000000000000')).toBeUndefined();
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

describe('multipart with an upload token', () => {
  const token = async (project: TestProject, body: Record<string, unknown>) => {
    const reply = await project.call('POST', '/upload-tokens', { body });
    expect(reply.status).toBe(201);
    return reply.body.token as string;
  };
  const putPartWith = async (
    project: TestProject,
    secret: string,
    uploadId: string,
    part: number,
    bytes: Buffer,
  ) => {
    const url = await project.call(
      'GET',
      `/files/upload/multipart/${uploadId}/part-url?part=${part}&size=${bytes.length}`,
      { token: secret },
    );
    expect(url.status).toBe(200);
    expect((await fetch(url.body.url, { method: 'PUT', body: bytes })).status).toBe(200);
  };
  const startWith = (
    project: TestProject,
    secret: string,
    total: number,
    contentType = 'application/octet-stream',
  ) =>
    project.call('POST', '/files/upload/multipart/start', {
      token: secret,
      body: { filename: 'a.bin', content_type: contentType, total_size_bytes: total },
    });

  // Unsized part URLs exist on the local store only: it bounds what their parts store while they stream.
  it.skipIf(storage === 's3')(
    'keeps the bytes a session stores within what it declared, so a token cannot fill the disk',
    async () => {
      const project = await coffer.newProject();
      const secret = await token(project, { max_size: 1000 });
      const { upload_id: uploadId } = (await startWith(project, secret, 1000)).body;
      const partUrl = async (part: number) =>
        (
          await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=${part}`, {
            token: secret,
          })
        ).body.url as string;
      const put = (url: string, body: Buffer | ReadableStream) =>
        fetch(url, { method: 'PUT', body, duplex: 'half' } as RequestInit);
      const chunked = (bytes: Buffer) =>
        new ReadableStream({
          start(controller) {
            controller.enqueue(new Uint8Array(bytes));
            controller.close();
          },
        });

      // One part longer than the whole upload: refused from its Content-Length, or while streaming.
      for (const body of [randomBytes(8 * MiB), chunked(randomBytes(8 * MiB))]) {
        const reply = await put(await partUrl(1), body);
        expect(reply.status).toBe(413);
        expect(((await reply.json()) as any).error.code).toBe('REQUEST_TOO_LARGE');
      }
      // Parts up to twice the declared total (room for a part re-cut), then no more.
      expect((await put(await partUrl(1), randomBytes(1000))).status).toBe(200);
      expect((await put(await partUrl(2), randomBytes(1000))).status).toBe(200);
      const over = await put(await partUrl(3), randomBytes(1));
      expect(over.status).toBe(413);
      expect(((await over.json()) as any).error.details).toMatchObject({
        max_bytes: 2000,
        stored_bytes: 2000,
      });
      // Replacing a part does not count its old version.
      const last = randomBytes(1000);
      const etag = (await put(await partUrl(1), last)).headers.get('etag')!;
      const parts = await project.call('GET', `/files/upload/multipart/${uploadId}`, { token: secret });
      expect(parts.body.parts.map((part: { size_bytes: number }) => part.size_bytes)).toEqual([1000, 1000]);
      const done = await project.call('POST', `/files/upload/multipart/${uploadId}/complete`, {
        token: secret,
        body: { parts: [{ part_number: 1, etag }] },
      });
      expect(done.status).toBe(200);
      expect(done.body.size_bytes).toBe(1000);
    },
  );

  it.skipIf(storage === 's3')('holds the stored-bytes bound when the parts arrive all at once', async () => {
    const project = await coffer.newProject();
    const secret = await token(project, { max_size: 1000 });
    const { upload_id: uploadId } = (await startWith(project, secret, 1000)).body;
    const statuses = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const url = (
          await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=${i + 1}`, {
            token: secret,
          })
        ).body.url;
        return (await fetch(url, { method: 'PUT', body: randomBytes(1000) })).status;
      }),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(2);
    expect(statuses.filter((status) => status === 413)).toHaveLength(18);
  });

  it('grants sized part URLs up to twice the declared total, so a token cannot fill the store', async () => {
    const project = await coffer.newProject();
    const secret = await token(project, { max_size: 1000 });
    const { upload_id: uploadId } = (await startWith(project, secret, 1000)).body;
    const partUrl = (part: number, size: number) =>
      project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=${part}&size=${size}`, {
        token: secret,
      });
    const tooLong = await partUrl(1, 1001);
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.error.details).toMatchObject({ field: 'size' });
    // Twenty parts asked for at once: the grants stop at twice the total.
    const granted = await Promise.all(Array.from({ length: 20 }, (_, i) => partUrl(i + 1, 500)));
    expect(granted.filter((reply) => reply.status === 200)).toHaveLength(4);
    const refused = granted.filter((reply) => reply.status === 413);
    expect(refused).toHaveLength(16);
    expect(refused[0]!.body.error).toMatchObject({
      code: 'REQUEST_TOO_LARGE',
      details: { max_bytes: 2000, granted_bytes: 2000 },
    });
    // A granted part number may be signed again at its size or below; its bytes must be exact.
    const number = granted.findIndex((reply) => reply.status === 200) + 1;
    const again = await partUrl(number, 500);
    expect(again.status).toBe(200);
    expect(
      (await fetch(again.body.url, { method: 'PUT', body: randomBytes(501) })).status,
    ).toBeGreaterThanOrEqual(400);
    expect((await fetch(again.body.url, { method: 'PUT', body: randomBytes(500) })).status).toBe(200);
  });

  // A streamed body (no Content-Length) is the local store's: S3 part URLs sign the length.
  it.skipIf(storage === 's3')('answers 404 to a part still arriving when its upload is aborted', async () => {
    const project = await coffer.newProject();
    const { upload_id: uploadId } = (await startWith(project, await token(project, {}), 2000)).body;
    const url = (await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=1&size=2000`))
      .body.url;
    let finish!: () => void;
    const halfway = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const body = new ReadableStream({
      async start(controller) {
        controller.enqueue(new Uint8Array(randomBytes(1000)));
        await halfway;
        controller.enqueue(new Uint8Array(randomBytes(1000)));
        controller.close();
      },
    });
    const put = fetch(url, { method: 'PUT', body, duplex: 'half' } as RequestInit);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await project.call('DELETE', `/files/upload/multipart/${uploadId}`)).status).toBe(204);
    finish();
    const reply = await put;
    expect(reply.status).toBe(404);
    expect(((await reply.json()) as any).error.code).toBe('NOT_FOUND');
  });

  it('applies the token constraints to total_size_bytes and counts a start toward max_files', async () => {
    const project = await coffer.newProject();
    const secret = await token(project, {
      max_size: 100,
      max_files: 2,
      allowed_mime_types: ['application/*'],
    });
    const tooBig = await startWith(project, secret, 101);
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error).toMatchObject({
      code: 'FILE_TOO_LARGE',
      details: { field: 'total_size_bytes' },
    });
    expect((await startWith(project, secret, 10, 'image/png')).status).toBe(422);
    expect((await startWith(project, secret, 10)).status).toBe(201);
    expect(
      (
        await project.call('POST', '/files/upload', {
          token: secret,
          body: { filename: 'b.bin', content_type: 'application/octet-stream', size_bytes: 1 },
        })
      ).status,
    ).toBe(201);
    const third = await startWith(project, secret, 10);
    expect(third.status).toBe(403);
    expect(third.body.error.code).toBe('TOKEN_LIMIT_REACHED');
  });

  it('lets a token drive only its own sessions', async () => {
    const project = await coffer.newProject();
    const mine = await token(project, {});
    const other = await token(project, {});
    const session = (await startWith(project, mine, 3)).body;
    const url = await project.call(
      'GET',
      `/files/upload/multipart/${session.upload_id}/part-url?part=1&size=3`,
      {
        token: mine,
      },
    );
    expect(url.status).toBe(200);
    const etag = (await fetch(url.body.url, { method: 'PUT', body: 'abc' })).headers.get('etag');
    for (const [method, path, body] of [
      ['GET', `/files/upload/multipart/${session.upload_id}`, undefined],
      ['GET', `/files/upload/multipart/${session.upload_id}/part-url?part=1`, undefined],
      [
        'POST',
        `/files/upload/multipart/${session.upload_id}/complete`,
        { parts: [{ part_number: 1, etag }] },
      ],
      ['DELETE', `/files/upload/multipart/${session.upload_id}`, undefined],
    ] as const) {
      const reply = await project.call(method, path, { token: other, body });
      expect(reply.status, `${method} ${path}`).toBe(404);
    }
    const done = await project.call('POST', `/files/upload/multipart/${session.upload_id}/complete`, {
      token: mine,
      body: { parts: [{ part_number: 1, etag }] },
    });
    expect(done.status).toBe(200);
    expect(done.body.status).toBe('ready');
  });

  it('lets a replacement token of the same owner finish a session, and keeps other owners out', async () => {
    const project = await coffer.newProject();
    const first = await token(project, { owner_user_id: 'user_1', owner_org_id: 'org_1' });
    const session = (await startWith(project, first, 3)).body;
    await putPartWith(project, first, session.upload_id, 1, Buffer.from('abc'));
    const strangers = [
      await token(project, { owner_user_id: 'user_1', owner_org_id: 'org_2' }),
      await token(project, { owner_user_id: 'user_2', owner_org_id: 'org_1' }),
      await token(project, {}),
    ];
    for (const stranger of strangers) {
      const reply = await project.call('GET', `/files/upload/multipart/${session.upload_id}`, {
        token: stranger,
      });
      expect(reply.status).toBe(404);
    }
    // The first token expired; the app hands the browser a new one for the same user and organization.
    const replacement = await token(project, { owner_user_id: 'user_1', owner_org_id: 'org_1' });
    const listed = await project.call('GET', `/files/upload/multipart/${session.upload_id}`, {
      token: replacement,
    });
    expect(listed.status).toBe(200);
    const [part] = listed.body.parts;
    const done = await project.call('POST', `/files/upload/multipart/${session.upload_id}/complete`, {
      token: replacement,
      body: { parts: [{ part_number: 1, etag: part.etag }] },
    });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ id: session.file_id, owner_user_id: 'user_1', owner_org_id: 'org_1' });

    // A session of a token without owner stays that token's alone.
    const anonymous = await token(project, {});
    const own = (await startWith(project, anonymous, 3)).body;
    const other = await token(project, {});
    expect(
      (await project.call('GET', `/files/upload/multipart/${own.upload_id}`, { token: other })).status,
    ).toBe(404);
  });
});
