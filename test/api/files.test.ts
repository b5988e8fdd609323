import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, put, settledChecksum, upload } from '../support/files.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const eventsOf = (fileId: string) =>
  coffer.services.db.query<{ type: string; payload: any }>(
    'SELECT type, payload FROM events WHERE file_id = $1 ORDER BY id',
    [fileId],
  );

describe('two-step upload', () => {
  it('initiates, stores the bytes through the presigned URL, and confirms to ready', async () => {
    const project = await coffer.newProject();
    const started = await initiate(project, { filename: 'notes.txt', bytes: 'hello coffer' });
    expect(started.file_id).toMatch(/^file_[0-9A-Z]{26}$/);
    // Served by Coffer itself on the local store; on S3 a URL of the bucket.
    if (coffer.services.store.capabilities.servesUrls)
      expect(started.upload_url.startsWith(`${coffer.config.publicUrl}/objects/`)).toBe(true);
    expect(new Date(started.expires_at).getTime()).toBeGreaterThan(Date.now());

    const pending = await project.call('GET', `/files/${started.file_id}`);
    expect(pending.body).toMatchObject({
      status: 'uploading',
      filename: 'notes.txt',
      size_bytes: 12,
      category: 'document',
    });
    expect(await eventsOf(started.file_id)).toEqual([
      {
        type: 'file.uploaded',
        payload: {
          event: 'file.uploaded',
          timestamp: expect.any(String),
          organization_id: project.organizationId,
          project_id: project.id,
          data: {
            file_id: started.file_id,
            filename: 'notes.txt',
            size: 12,
            mime_type: 'text/plain',
            status: 'uploading',
          },
        },
      },
    ]);

    const stored = await put(started.upload_url, 'hello coffer');
    expect(stored.status).toBe(200);
    expect(stored.headers.get('etag')).toBeTruthy();

    const confirmed = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toMatchObject({ id: started.file_id, status: 'ready' });
    expect(await settledChecksum(coffer, project, started.file_id)).toBe(
      createHash('sha256').update('hello coffer').digest('hex'),
    );
    expect((await eventsOf(started.file_id)).map((e) => e.type)).toEqual(['file.uploaded', 'file.ready']);

    const again = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('INVALID_STATE');
  });

  it('keeps the file uploading when confirm finds no object, or one of the wrong size', async () => {
    const project = await coffer.newProject();
    const started = await initiate(project, { bytes: 'twelve bytes' });
    const early = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('INVALID_STATE');
    const wrongSize = await put(started.upload_url, 'short');
    // Coffer answers 400; S3 refuses the signed Content-Length with 403.
    expect(wrongSize.status).toBe(coffer.services.store.capabilities.servesUrls ? 400 : 403);
    expect((await project.call('GET', `/files/${started.file_id}`)).body.status).toBe('uploading');
  });

  it('goes to processing and queues the scan when the project scans uploads', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const confirmed = await upload(project);
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.status).toBe('processing');
    const jobs = await coffer.services.db.query('SELECT kind FROM jobs WHERE file_id = $1', [
      confirmed.body.id,
    ]);
    expect(jobs).toEqual([{ kind: 'scan' }]);
  });

  it('stores objects under generated keys, never the filename', async () => {
    const project = await coffer.newProject();
    const confirmed = await upload(project, { filename: '..%2F..%2Fetc%2Fpasswd.txt' });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.storage_key).toMatch(/^proj_[0-9A-Z]{26}\/file_[0-9A-Z]{26}\/[0-9A-Z]{26}$/);
    expect((await coffer.services.store.head(confirmed.body.storage_key))?.size).toBe(11);
  });

  it('accepts a confirm sent with a JSON content type and no body', async () => {
    const project = await coffer.newProject();
    const started = await initiate(project);
    await put(started.upload_url, started.bytes);
    const reply = await fetch(`${coffer.url}/v1/projects/${project.id}/files/${started.file_id}/confirm`, {
      method: 'POST',
      headers: { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' },
    });
    expect(reply.status).toBe(200);
  });
});

describe('project checks at initiate', () => {
  const attempt = (project: TestProject, body: Record<string, unknown>) =>
    project.call('POST', '/files/upload', {
      body: { filename: 'a.png', content_type: 'image/png', size_bytes: 10, ...body },
    });

  it('applies allowed_mime_types with wildcards', async () => {
    const project = await coffer.newProject({ allowed_mime_types: 'image/*,application/pdf' });
    expect((await attempt(project, {})).status).toBe(201);
    expect((await attempt(project, { filename: 'a.pdf', content_type: 'application/pdf' })).status).toBe(201);
    const refused = await attempt(project, { filename: 'a.txt', content_type: 'text/plain' });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'content_type' },
    });
    const any = await coffer.newProject({ allowed_mime_types: '*/*' });
    expect((await attempt(any, { filename: 'a.thing', content_type: 'application/x-thing' })).status).toBe(
      201,
    );
  });

  it('refuses an extension that contradicts the content type', async () => {
    const project = await coffer.newProject();
    const reply = await attempt(project, { filename: 'photo.png', content_type: 'application/pdf' });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'filename' } });
    expect((await attempt(project, { filename: 'photo.JPG', content_type: 'image/jpeg' })).status).toBe(201);
    expect((await attempt(project, { filename: 'README', content_type: 'text/plain' })).status).toBe(201);
  });

  it('answers 413 FILE_TOO_LARGE above max_file_size_bytes', async () => {
    const project = await coffer.newProject({ max_file_size_bytes: 100 });
    expect((await attempt(project, { size_bytes: 100 })).status).toBe(201);
    const reply = await attempt(project, { size_bytes: 101 });
    expect(reply.status).toBe(413);
    expect(reply.body.error.code).toBe('FILE_TOO_LARGE');
  });

  it.each([
    ['empty', ''],
    ['too long', `${'a'.repeat(252)}.png`],
    ['a control character', 'a\u0001.png'],
    ['a slash', 'dir/a.png'],
    ['a backslash', 'dir\\a.png'],
    ['a direction override', 'gnp\u202e.exe'],
    ['dot-dot', '..'],
  ])('refuses a filename with %s (422)', async (_what, filename) => {
    const project = await coffer.newProject();
    const reply = await attempt(project, { filename });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'filename' } });
  });

  it.each([
    [{ size_bytes: 'ten' }, 400, 'size_bytes'],
    [{ size_bytes: -1 }, 422, 'size_bytes'],
    [{ size_bytes: 9007199254740994 }, 422, 'size_bytes'],
    [{ size_bytes: 1e20 }, 422, 'size_bytes'],
    [{ filename: undefined }, 400, 'filename'],
    [{ content_type: 'not a type' }, 422, 'content_type'],
    [{ tags: ['  '] }, 422, 'tags'],
    [{ metadata: [1, 2] }, 400, 'metadata'],
    [{ folder_id: 'fld_01ARZ3NDEKTSV4RRFFQ69G5FAV' }, 422, 'folder_id'],
    [{ extra: true }, 400, 'extra'],
  ])('refuses %j before creating anything', async (body, status, field) => {
    const project = await coffer.newProject();
    const reply = await attempt(project, body);
    expect(reply.status).toBe(status);
    expect(reply.body.error.details.field).toBe(field);
    const [row] = await coffer.services.db.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM files WHERE project_id = $1',
      [project.id],
    );
    expect(row?.count).toBe(0);
  });
});

describe('get and list', () => {
  let project: TestProject;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    project = await coffer.newProject();
    const folder = await project.call('POST', '/folders', { body: { name: 'reports' } });
    ids.folder = folder.body.id;
    const make = async (name: string, input: Parameters<typeof upload>[1]) => {
      const reply = await upload(project, input);
      ids[name] = reply.body.id;
    };
    await make('report', {
      filename: 'Quarterly_Report.pdf',
      content_type: 'application/pdf',
      bytes: 'x'.repeat(300),
      folder_id: ids.folder,
      tags: ['finance', 'q1'],
      metadata: { team: 'fin', year: 2026 },
    });
    await make('photo', {
      filename: 'beach photo.jpg',
      content_type: 'image/jpeg',
      bytes: 'x'.repeat(50),
      tags: ['holiday'],
      metadata: { team: 'ops' },
    });
    await make('notes', { filename: '100%_notes.txt', bytes: 'x'.repeat(10), tags: ['finance'] });
    ids.pending = (await initiate(project, { filename: 'pending.txt' })).file_id;
  });

  const list = async (query: string) => {
    const reply = await project.call('GET', `/files${query}`);
    expect(reply.status).toBe(200);
    return reply.body;
  };
  const listIds = async (query: string) => (await list(query)).items.map((f: { id: string }) => f.id);

  it('gets a file with every documented field', async () => {
    const reply = await project.call('GET', `/files/${ids.report}`);
    expect(Object.keys(reply.body).sort()).toEqual(
      [
        'id',
        'project_id',
        'folder_id',
        'status',
        'filename',
        'content_type',
        'size_bytes',
        'category',
        'storage_key',
        'checksum_sha256',
        'metadata',
        'tags',
        'owner_user_id',
        'owner_org_id',
        'legal_hold',
        'failure_reason',
        'scan_signature',
        'created_at',
        'updated_at',
        'deleted_at',
      ].sort(),
    );
    expect(reply.body).toMatchObject({
      project_id: project.id,
      folder_id: ids.folder,
      category: 'document',
      legal_hold: false,
    });
  });

  it('lists newest first with the full envelope', async () => {
    const body = await list('');
    expect(body.items.map((f: { id: string }) => f.id)).toEqual([
      ids.pending,
      ids.notes,
      ids.photo,
      ids.report,
    ]);
    expect(body).toMatchObject({ total: 4, limit: 50, offset: 0, has_more: false, next_cursor: null });
  });

  it('filters by every parameter', async () => {
    expect(await listIds('?q=REPORT')).toEqual([ids.report]);
    expect(await listIds('?q=%25_')).toEqual([ids.notes]);
    expect(await listIds(`?folder_id=${ids.folder}`)).toEqual([ids.report]);
    expect(await listIds('?folder_id=root')).toEqual([ids.pending, ids.notes, ids.photo]);
    expect(await listIds('?tags=finance')).toEqual([ids.notes, ids.report]);
    expect(await listIds('?tags=finance&tags=q1')).toEqual([ids.report]);
    expect(await listIds('?category=image')).toEqual([ids.photo]);
    expect(await listIds('?status=uploading')).toEqual([ids.pending]);
    expect(await listIds('?size_min=50&size_max=300')).toEqual([ids.photo, ids.report]);
    expect(await listIds('?size_max=49')).toEqual([ids.pending, ids.notes]);
    // Sizes are numbers: whole bytes from 49.5 up means from 50, up to 49.9 means up to 49.
    expect(await listIds('?size_min=49.5&size_max=300.5')).toEqual([ids.photo, ids.report]);
    expect(await listIds('?size_max=49.9')).toEqual([ids.pending, ids.notes]);
    expect(await listIds(`?metadata=${encodeURIComponent('{"team":"fin"}')}`)).toEqual([ids.report]);
    const created = (await project.call('GET', `/files/${ids.photo}`)).body.created_at;
    expect(await listIds(`?date_from=${created}&date_to=${created}`)).toEqual([ids.photo]);
    expect(await listIds('?date_from=2999-01-01')).toEqual([]);
  });

  it('paginates by offset and by cursor, the cursor taking priority', async () => {
    const first = await list('?limit=2');
    expect(first).toMatchObject({ total: 4, limit: 2, offset: 0, has_more: true, next_cursor: ids.notes });
    const second = await list(`?limit=2&cursor=${first.next_cursor}&offset=3`);
    expect(second.items.map((f: { id: string }) => f.id)).toEqual([ids.photo, ids.report]);
    expect(second).toMatchObject({ total: 4, has_more: false, next_cursor: null });
    const byOffset = await list('?limit=2&offset=2');
    expect(byOffset.items.map((f: { id: string }) => f.id)).toEqual([ids.photo, ids.report]);
    expect(byOffset).toMatchObject({ offset: 2, has_more: false });
  });

  it.each([
    '?limit=ten',
    '?limit=1.5',
    '?size_min=abc',
    '?status=lost',
    '?category=spreadsheet',
    '?date_from=yesterday',
    '?date_from=2026-02-31',
    '?date_to=2026-11-26T24:00:00Z',
    '?metadata=notjson',
    '?metadata=[1]',
    '?cursor=abc',
  ])('answers 400 BAD_REQUEST to the unreadable %s', async (query) => {
    const reply = await project.call('GET', `/files${query}`);
    expect(reply.status).toBe(400);
    expect(reply.body.error.code).toBe('BAD_REQUEST');
  });

  it.each([
    ['?limit=0', 'limit'],
    ['?limit=201', 'limit'],
    ['?offset=-1', 'offset'],
    ['?offset=1e20', 'offset'],
    ['?size_min=-1', 'size_min'],
    ['?size_max=1e20', 'size_max'],
    [`?q=${'a'.repeat(256)}`, 'q'],
  ])('answers 422 VALIDATION_ERROR to the out-of-range %s', async (query, field) => {
    const reply = await project.call('GET', `/files${query}`);
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });
});

describe('date filters', () => {
  let project: TestProject;
  const ids: Record<string, string> = {};
  // Days around today: a file's id is made when it is, and list pages are bounded by id from date_to
  // (within a day's clock slack), so the dates given to files stay near their ids.
  const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
  const [yesterday, today, tomorrow] = [day(-1), day(0), day(1)];

  beforeAll(async () => {
    project = await coffer.newProject();
    for (const [name, createdAt] of [
      ['early', `${today}T00:00:00.000Z`],
      ['morning', `${today}T10:00:00.000Z`],
      ['late', `${today}T23:59:59.999Z`],
      ['next', `${tomorrow}T00:00:00.000Z`],
    ]) {
      ids[name!] = (await upload(project)).body.id;
      await coffer.services.db.query('UPDATE files SET created_at = $2 WHERE id = $1', [
        ids[name!],
        createdAt,
      ]);
    }
  });

  const listIds = async (query: string) => {
    const reply = await project.call('GET', `/files${query}`);
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    return reply.body.items.map((f: { id: string }) => f.id);
  };

  it('includes the whole day of a date-only date_to', async () => {
    expect(await listIds(`?date_from=${today}&date_to=${today}`)).toEqual([ids.late, ids.morning, ids.early]);
    expect(await listIds(`?date_to=${yesterday}`)).toEqual([]);
    expect(await listIds(`?date_from=${tomorrow}`)).toEqual([ids.next]);
  });

  it('reads timestamps without an offset as UTC, whatever the server zone', async () => {
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      expect(await listIds(`?date_from=${today}T10:00:00&date_to=${today}T10:00`)).toEqual([ids.morning]);
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(await listIds(`?date_from=${today}T11:00:00%2B01:00&date_to=${today}T05:00:00-05:00`)).toEqual([
      ids.morning,
    ]);
  });
});

describe('download', () => {
  it('hands out a URL that streams the bytes with safe headers and ranges', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project, { filename: 'résumé "final".txt', bytes: '0123456789' })).body;
    const reply = await project.call('GET', `/files/${file.id}/download?ttl=120`);
    expect(reply.status).toBe(200);
    const expiresIn = new Date(reply.body.expires_at).getTime() - Date.now();
    expect(expiresIn).toBeGreaterThan(100_000);
    expect(expiresIn).toBeLessThanOrEqual(120_000);

    const got = await fetch(reply.body.url);
    expect(got.status).toBe(200);
    expect(await got.text()).toBe('0123456789');
    expect(got.headers.get('content-disposition')).toContain('attachment');
    expect(got.headers.get('content-disposition')).toContain(
      "filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.txt",
    );
    // Headers only Coffer adds: the bucket of an S3 store is to be served from an origin of its own.
    if (coffer.services.store.capabilities.servesUrls) {
      expect(got.headers.get('x-content-type-options')).toBe('nosniff');
      expect(got.headers.get('content-security-policy')).toBe('sandbox');
    }
    expect(got.headers.get('accept-ranges')).toBe('bytes');

    const range = await fetch(reply.body.url, { headers: { range: 'bytes=2-4' } });
    expect(range.status).toBe(206);
    expect(range.headers.get('content-range')).toBe('bytes 2-4/10');
    expect(await range.text()).toBe('234');

    const tampered = await fetch(reply.body.url.replace(/(sig|X-Amz-Signature)=[0-9a-f]{4}/, '$1=0000'));
    expect(tampered.status).toBe(403);
  });

  it('uses the project TTL by default and ignores ttl when signed URLs are required', async () => {
    for (const [settings, query, expected] of [
      [{ signed_url_ttl_seconds: 600 }, '', 600],
      [{ signed_url_ttl_seconds: 600, require_signed_urls: true }, '?ttl=60', 600],
      [{ signed_url_ttl_seconds: 600 }, '?ttl=60', 60],
    ] as const) {
      const project = await coffer.newProject(settings);
      const file = (await upload(project)).body;
      const reply = await project.call('GET', `/files/${file.id}/download${query}`);
      const seconds = (new Date(reply.body.expires_at).getTime() - Date.now()) / 1000;
      expect(Math.round(seconds)).toBe(expected);
    }
  });

  it('accepts any number of seconds in range, fractions too', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    const reply = await project.call('GET', `/files/${file.id}/download?ttl=90.5`);
    expect(reply.status).toBe(200);
    const seconds = (new Date(reply.body.expires_at).getTime() - Date.now()) / 1000;
    expect(seconds).toBeGreaterThan(89);
    expect(seconds).toBeLessThanOrEqual(90.5);
  });

  it('ignores even an out-of-range ttl when signed URLs are required', async () => {
    const project = await coffer.newProject({ signed_url_ttl_seconds: 600, require_signed_urls: true });
    const file = (await upload(project)).body;
    for (const ttl of ['59', '86401', '0', '-5']) {
      const reply = await project.call('GET', `/files/${file.id}/download?ttl=${ttl}`);
      expect(reply.status, ttl).toBe(200);
      expect(Math.round((new Date(reply.body.expires_at).getTime() - Date.now()) / 1000)).toBe(600);
    }
  });

  it('validates ttl and refuses files that are not ready', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    for (const ttl of ['59', '86401', '59.9', '1e400']) {
      const reply = await project.call('GET', `/files/${file.id}/download?ttl=${ttl}`);
      expect(reply.status, ttl).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'ttl' } });
    }
    const unreadable = await project.call('GET', `/files/${file.id}/download?ttl=soon`);
    expect(unreadable.status).toBe(400);
    expect(unreadable.body.error.code).toBe('BAD_REQUEST');
    const pending = await initiate(project);
    const reply = await project.call('GET', `/files/${pending.file_id}/download`);
    expect(reply.status).toBe(409);
    expect(reply.body.error.code).toBe('INVALID_STATE');
  });
});

describe('tags and metadata', () => {
  it('replaces and unions tags, trimmed and unique', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project, { tags: ['a'] })).body;
    const replaced = await project.call('PUT', `/files/${file.id}/tags`, {
      body: { tags: [' x ', 'y', 'x'] },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.tags).toEqual(['x', 'y']);
    const added = await project.call('POST', `/files/${file.id}/tags`, { body: { tags: ['y', 'z'] } });
    expect(added.body.tags).toEqual(['x', 'y', 'z']);
    for (const tags of [[''], ['t'.repeat(65)], Array.from({ length: 51 }, (_, i) => `t${i}`)]) {
      const reply = await project.call('PUT', `/files/${file.id}/tags`, { body: { tags } });
      expect(reply.status).toBe(422);
      expect(reply.body.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await project.call('PUT', `/files/${file.id}/tags`, { body: { tags: 'x' } })).status).toBe(400);
  });

  it('replaces and merges metadata shallowly, within a size bound', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project, { metadata: { a: 1, nested: { x: 1 } } })).body;
    const merged = await project.call('POST', `/files/${file.id}/metadata`, {
      body: { metadata: { b: 2, nested: { y: 2 } } },
    });
    expect(merged.body.metadata).toEqual({ a: 1, b: 2, nested: { y: 2 } });
    const replaced = await project.call('PUT', `/files/${file.id}/metadata`, {
      body: { metadata: { c: 3 } },
    });
    expect(replaced.body.metadata).toEqual({ c: 3 });
    const big = await project.call('PUT', `/files/${file.id}/metadata`, {
      body: { metadata: { v: 'x'.repeat(20_000) } },
    });
    expect(big.status).toBe(422);
  });

  it('validates metadata against an enforced, active schema on every write', async () => {
    const project = await coffer.newProject({ enforce_schema: true });
    const schema = {
      type: 'object',
      properties: { team: { type: 'string' }, year: { type: 'integer', minimum: 2000 } },
      required: ['team'],
    };
    const put1 = await project.call('PUT', '/metadata-schema', { body: { schema, is_active: true } });
    expect(put1.status).toBe(200);
    expect(put1.body).toMatchObject({ schema, is_active: true });
    expect((await project.call('GET', '/metadata-schema')).body.schema).toEqual(schema);

    const refused = await project.call('POST', '/files/upload', {
      body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1, metadata: { year: 1999 } },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('VALIDATION_ERROR');
    expect(refused.body.error.details.errors.length).toBeGreaterThan(0);

    const file = (await upload(project, { metadata: { team: 'a' } })).body;
    expect(
      (await project.call('POST', `/files/${file.id}/metadata`, { body: { metadata: { year: 2020 } } }))
        .status,
    ).toBe(200);
    const bad = await project.call('PUT', `/files/${file.id}/metadata`, {
      body: { metadata: { year: 2020 } },
    });
    expect(bad.status).toBe(422);

    await project.call('PUT', '/metadata-schema', { body: { schema, is_active: false } });
    expect((await project.call('PUT', `/files/${file.id}/metadata`, { body: { metadata: {} } })).status).toBe(
      200,
    );
    await project.call('PUT', '/metadata-schema', { body: { schema, is_active: true } });
    await project.call('PATCH', '', { body: { settings: { enforce_schema: false } } });
    expect((await project.call('PUT', `/files/${file.id}/metadata`, { body: { metadata: {} } })).status).toBe(
      200,
    );

    const invalid = await project.call('PUT', '/metadata-schema', { body: { schema: { type: 'nonsense' } } });
    expect(invalid.status).toBe(422);
    expect((await project.call('DELETE', '/metadata-schema')).status).toBe(204);
    expect((await project.call('GET', '/metadata-schema')).status).toBe(404);
  });
});

describe('folders', () => {
  it('creates, lists by parent, renames and moves with the subtree paths following', async () => {
    const project = await coffer.newProject();
    const a = (await project.call('POST', '/folders', { body: { name: 'a' } })).body;
    const b = (await project.call('POST', '/folders', { body: { name: 'b', parent_id: a.id } })).body;
    const c = (await project.call('POST', '/folders', { body: { name: 'c', parent_id: b.id } })).body;
    expect([a.path, b.path, c.path]).toEqual(['a', 'a/b', 'a/b/c']);
    expect(b).toMatchObject({
      id: expect.stringMatching(/^fld_/),
      name: 'b',
      parent_id: a.id,
      created_at: expect.any(String),
    });

    const dup = await project.call('POST', '/folders', { body: { name: 'b', parent_id: a.id } });
    expect(dup.status).toBe(409);
    expect((await project.call('GET', '/folders')).body.items.map((f: { id: string }) => f.id)).toEqual([
      a.id,
    ]);
    expect((await project.call('GET', `/folders?parent_id=${a.id}`)).body).toMatchObject({
      total: 1,
      items: [{ id: b.id }],
    });

    const renamed = await project.call('PATCH', `/folders/${a.id}`, { body: { name: 'top' } });
    expect(renamed.body.path).toBe('top');
    expect((await project.call('GET', `/folders/${c.id}`)).body.path).toBe('top/b/c');

    const moved = await project.call('PATCH', `/folders/${c.id}`, { body: { parent_id: null } });
    expect(moved.body).toMatchObject({ path: 'c', parent_id: null });
    const cycle = await project.call('PATCH', `/folders/${a.id}`, { body: { parent_id: b.id } });
    expect(cycle.status).toBe(422);
    expect((await project.call('PATCH', `/folders/${b.id}`, { body: { name: 'x/y' } })).status).toBe(422);
  });

  it('refuses an empty parent_id with 422 rather than guessing the root', async () => {
    const project = await coffer.newProject();
    const a = (await project.call('POST', '/folders', { body: { name: 'a' } })).body;
    const b = (await project.call('POST', '/folders', { body: { name: 'b', parent_id: a.id } })).body;
    for (const [method, path, body] of [
      ['POST', '/folders', { name: 'c', parent_id: '' }],
      ['PATCH', `/folders/${b.id}`, { parent_id: '' }],
    ] as const) {
      const reply = await project.call(method, path, { body });
      expect(reply.status, method).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'parent_id' } });
    }
    expect((await project.call('GET', '/folders')).body.items.map((f: { id: string }) => f.id)).toEqual([
      a.id,
    ]);
    expect((await project.call('GET', `/folders/${b.id}`)).body).toMatchObject({
      parent_id: a.id,
      path: 'a/b',
    });
  });

  it('deletes only empty folders and moves files in and out', async () => {
    const project = await coffer.newProject();
    const folder = (await project.call('POST', '/folders', { body: { name: 'docs' } })).body;
    const file = (await upload(project)).body;
    const moved = await project.call('POST', `/files/${file.id}/move`, { body: { folder_id: folder.id } });
    expect(moved.body.folder_id).toBe(folder.id);
    const busy = await project.call('DELETE', `/folders/${folder.id}`);
    expect(busy.status).toBe(409);
    expect(
      (await project.call('POST', `/files/${file.id}/move`, { body: { folder_id: null } })).body.folder_id,
    ).toBeNull();
    expect((await project.call('DELETE', `/folders/${folder.id}`)).status).toBe(204);
    expect((await project.call('GET', `/folders/${folder.id}`)).status).toBe(404);
  });

  it('never lets crossing moves make a cycle', async () => {
    const project = await coffer.newProject();
    for (let round = 0; round < 5; round++) {
      const a = (await project.call('POST', '/folders', { body: { name: `a${round}` } })).body;
      const b = (await project.call('POST', '/folders', { body: { name: `b${round}` } })).body;
      const [aIntoB, bIntoA] = await Promise.all([
        project.call('PATCH', `/folders/${a.id}`, { body: { parent_id: b.id } }),
        project.call('PATCH', `/folders/${b.id}`, { body: { parent_id: a.id } }),
      ]);
      expect([aIntoB.status, bIntoA.status].sort()).toEqual([200, 422]);
    }
  });

  it('lets an upload into a folder and the deletion of that folder race without a half-way state', async () => {
    const project = await coffer.newProject();
    for (let round = 0; round < 5; round++) {
      const folder = (await project.call('POST', '/folders', { body: { name: `f${round}` } })).body;
      const [initiated, deleted] = await Promise.all([
        project.call('POST', '/files/upload', {
          body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1, folder_id: folder.id },
        }),
        project.call('DELETE', `/folders/${folder.id}`),
      ]);
      if (initiated.status === 201) expect(deleted.status).toBe(409);
      else {
        expect(deleted.status).toBe(204);
        expect(initiated.status).toBe(422);
      }
    }
  });

  /** The folders of a project whose path is not their parent's path, a slash and their name. */
  const strayPaths = (projectId: string) =>
    coffer.services.db.query<{ name: string; path: string; expected: string }>(
      `SELECT f.name, f.path, coalesce(p.path || '/', '') || f.name AS expected
         FROM folders f LEFT JOIN folders p ON p.id = f.parent_id
        WHERE f.project_id = $1 AND f.path <> coalesce(p.path || '/', '') || f.name`,
      [projectId],
    );

  it('keeps every path in step when a folder is renamed while folders move into its subtree', async () => {
    const project = await coffer.newProject();
    const create = async (name: string, parentId?: string) =>
      (await project.call('POST', '/folders', { body: { name, parent_id: parentId } })).body;
    for (let round = 0; round < 6; round++) {
      const a = await create(`a${round}`);
      const c = await create('c', a.id);
      const s = await create('s', a.id);
      const z = await create('z', a.id);
      const b = await create(`b${round}`);
      const replies = await Promise.all([
        project.call('PATCH', `/folders/${b.id}`, { body: { parent_id: c.id } }),
        project.call('PATCH', `/folders/${z.id}`, { body: { parent_id: s.id } }),
        project.call('PATCH', `/folders/${a.id}`, { body: { name: `a${round}-renamed` } }),
      ]);
      expect(replies.map((reply) => reply.status)).toEqual([200, 200, 200]);
    }
    expect(await strayPaths(project.id)).toEqual([]);
  });

  it('keeps every path in step when a folder is renamed while folders are created under it', async () => {
    const project = await coffer.newProject();
    for (let round = 0; round < 6; round++) {
      const a = (await project.call('POST', '/folders', { body: { name: `a${round}` } })).body;
      const c = (await project.call('POST', '/folders', { body: { name: 'c', parent_id: a.id } })).body;
      const replies = await Promise.all([
        project.call('POST', '/folders', { body: { name: 'n', parent_id: c.id } }),
        project.call('POST', '/upload-tokens', { body: { folder_path: `a${round}/c/t` } }),
        project.call('PATCH', `/folders/${a.id}`, { body: { name: `a${round}-renamed` } }),
      ]);
      expect(replies.map((reply) => reply.status)).toEqual([201, 201, 200]);
    }
    expect(await strayPaths(project.id)).toEqual([]);
  });

  it('creates a folder_path asked for by simultaneous requests once', async () => {
    const project = await coffer.newProject();
    const replies = await Promise.all(
      Array.from({ length: 6 }, () =>
        project.call('POST', '/upload-tokens', { body: { folder_path: 'x/y/z' } }),
      ),
    );
    expect(replies.map((reply) => reply.status)).toEqual(Array(6).fill(201));
    expect(new Set(replies.map((reply) => reply.body.folder_id)).size).toBe(1);
    const folders = await coffer.services.db.query<{ id: string; path: string }>(
      'SELECT id, path FROM folders WHERE project_id = $1 ORDER BY path',
      [project.id],
    );
    expect(folders.map((folder) => folder.path)).toEqual(['x', 'x/y', 'x/y/z']);
    expect(replies[0]!.body.folder_id).toBe(folders[2]!.id);
    expect(await strayPaths(project.id)).toEqual([]);
  });

  it("does not find another project's folder", async () => {
    const a = await coffer.newProject();
    const b = await coffer.newProject();
    const folder = (await b.call('POST', '/folders', { body: { name: 'x' } })).body;
    const file = (await upload(a)).body;
    const reply = await a.call('POST', `/files/${file.id}/move`, { body: { folder_id: folder.id } });
    expect(reply.status).toBe(404);
    expect((await a.call('GET', `/folders/${folder.id}`)).status).toBe(404);
  });
});

describe('delete, legal hold and quarantine', () => {
  it('soft-deletes: 200 with deleted_at, file.deleted recorded, then 404 everywhere', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    const deleted = await project.call('DELETE', `/files/${file.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body.deleted_at).toEqual(expect.any(String));
    expect((await eventsOf(file.id)).map((e) => e.type)).toContain('file.deleted');
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['GET', '/download', undefined],
      ['PUT', '/tags', { tags: [] }],
      ['POST', '/metadata', { metadata: {} }],
      ['POST', '/move', { folder_id: null }],
      ['DELETE', '', undefined],
      ['POST', '/confirm', undefined],
    ] as const) {
      const reply = await project.call(method, `/files/${file.id}${path}`, { body });
      expect(reply.status, `${method} ${path}`).toBe(404);
    }
    expect((await project.call('GET', '/files')).body.total).toBe(0);
  });

  it('refuses to delete a held file with 409 LEGAL_HOLD until the hold is released', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    const held = await project.call('PUT', `/files/${file.id}/legal-hold`, {
      body: { reason: 'litigation' },
    });
    expect(held.body.legal_hold).toBe(true);
    const refused = await project.call('DELETE', `/files/${file.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('LEGAL_HOLD');
    expect((await project.call('DELETE', `/files/${file.id}/legal-hold`)).body.legal_hold).toBe(false);
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
  });

  it('releases the hold of a file quarantined while held, so that it can be deleted', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    await project.call('PUT', `/files/${file.id}/legal-hold`, { body: { reason: 'audit' } });
    await coffer.services.db.query("UPDATE files SET status = 'quarantined' WHERE id = $1", [file.id]);
    const stuck = await project.call('DELETE', `/files/${file.id}`);
    expect(stuck.status).toBe(409);
    expect(stuck.body.error.code).toBe('LEGAL_HOLD');
    const released = await project.call('DELETE', `/files/${file.id}/legal-hold`);
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ status: 'quarantined', legal_hold: false });
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
  });

  it('answers 409 CONFLICT on every per-file call of a quarantined file but DELETE', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    await coffer.services.db.query("UPDATE files SET status = 'quarantined' WHERE id = $1", [file.id]);
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['GET', '/download', undefined],
      ['PUT', '/tags', { tags: [] }],
      ['POST', '/tags', { tags: ['x'] }],
      ['PUT', '/metadata', { metadata: {} }],
      ['POST', '/metadata', { metadata: {} }],
      ['POST', '/move', { folder_id: null }],
      ['POST', '/confirm', undefined],
      ['PUT', '/legal-hold', {}],
    ] as const) {
      const reply = await project.call(method, `/files/${file.id}${path}`, { body });
      expect(reply.status, `${method} ${path}`).toBe(409);
      expect(reply.body.error.code).toBe('CONFLICT');
    }
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
  });
});

describe('background collection', () => {
  it('removes the objects of deleted files after the grace period, and fails abandoned uploads', async () => {
    const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0', COFFER_UPLOAD_URL_TTL_SECONDS: '1' });
    try {
      const project = await quick.newProject();
      const { store } = quick.services;
      const file = (await upload(project)).body;
      expect(await store.head(file.storage_key)).toBeDefined();
      await project.call('DELETE', `/files/${file.id}`);

      const abandoned = await initiate(project);
      await put(abandoned.upload_url, abandoned.bytes);
      const abandonedKey = (await project.call('GET', `/files/${abandoned.file_id}`)).body.storage_key;
      await new Promise((resolve) => setTimeout(resolve, 1100));

      await quick.services.collector.sweep();
      expect(await store.head(file.storage_key)).toBeUndefined();
      // Nothing of the abandoned upload's bytes is left to become an object.
      expect(await store.seal(abandonedKey)).toBeUndefined();
      const failed = await project.call('GET', `/files/${abandoned.file_id}`);
      expect(failed.body).toMatchObject({ status: 'failed', failure_reason: 'upload_abandoned' });
    } finally {
      await quick.close();
    }
  });

  it('collects more deleted files in one pass than one statement takes on the embedded engine', async () => {
    const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0' });
    try {
      const project = await quick.newProject();
      const files = [];
      for (let i = 0; i < 25; i++) files.push((await upload(project)).body);
      for (const file of files) await project.call('DELETE', `/files/${file.id}`);

      expect((await quick.services.collector.sweep()).purged).toBe(25);
      for (const file of files) expect(await quick.services.store.head(file.storage_key)).toBeUndefined();
      expect((await quick.services.collector.sweep()).purged).toBe(0);
    } finally {
      await quick.close();
    }
  });

  it('keeps objects during the grace period', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    await project.call('DELETE', `/files/${file.id}`);
    await coffer.services.collector.sweep();
    expect(await coffer.services.store.head(file.storage_key)).toBeDefined();
  });
});

describe('admin key on file endpoints', () => {
  it('may read any project', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    const reply = await coffer.call('GET', `/v1/projects/${project.id}/files/${file.id}`, {
      token: ADMIN_KEY,
    });
    expect(reply.status).toBe(200);
  });
});
