import { beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, type TestProject } from '../support/coffer.ts';
import { initiate, upload } from '../support/files.ts';
import { coffer, serveFiles } from '../support/files-api.ts';

serveFiles();

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
