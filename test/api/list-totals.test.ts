import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, put, upload } from '../support/files.ts';

// The totals of listings by status, category, folder or tags come from counts kept with every change
// (not from counting rows): whatever happened to the files, each total is the number of files listed.
let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const FILTERS = [
  '',
  'status=ready',
  'status=uploading',
  'category=document',
  'category=image',
  'folder_id=root',
  'tags=a',
  'tags=b',
  'tags=a&tags=a',
  'tags=a&tags=b',
  'tags=b&tags=a&tags=b',
  'tags=a&tags=b&tags=c',
];

async function expectTotalsMatch(project: TestProject, queries: string[]): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const query of queries) {
    const reply = await project.call('GET', `/files?limit=200&${query}`);
    expect(reply.status).toBe(200);
    expect(reply.body.total, query || 'no filter').toBe(reply.body.items.length);
    totals[query] = reply.body.total;
  }
  return totals;
}

const deltasOf = async (projectId: string, table = 'file_count_deltas') =>
  (
    await coffer.services.db.query<{ n: number }>(
      `SELECT count(*)::int8 AS n FROM ${table} WHERE project_id = $1`,
      [projectId],
    )
  )[0]!.n;

describe('list totals', () => {
  it('count every file listed through uploads, confirms, moves, deletes and folder removal', async () => {
    const project = await coffer.newProject();
    const folder = (await project.call('POST', '/folders', { body: { name: 'docs' } })).body.id as string;
    const queries = [...FILTERS, `folder_id=${folder}`, `status=ready&category=document&folder_id=${folder}`];

    expect(await expectTotalsMatch(project, queries)).toMatchObject({ '': 0 });
    const notes = (await upload(project, { filename: 'notes.txt', tags: ['a', 'b'] })).body.id as string;
    const report = (await upload(project, { filename: 'report.txt', folder_id: folder, tags: ['a'] })).body
      .id as string;
    const photo = (await upload(project, { filename: 'photo.png', content_type: 'image/png', bytes: 'png' }))
      .body.id as string;
    await initiate(project, { filename: 'pending.txt' });
    expect(await expectTotalsMatch(project, queries)).toMatchObject({
      '': 4,
      'status=ready': 3,
      'status=uploading': 1,
      'category=document': 3,
      'category=image': 1,
      [`folder_id=${folder}`]: 1,
      'tags=a': 2,
      'tags=b': 1,
    });

    expect((await project.call('PUT', `/files/${photo}/tags`, { body: { tags: ['b'] } })).status).toBe(200);
    expect((await project.call('POST', `/files/${notes}/move`, { body: { folder_id: folder } })).status).toBe(
      200,
    );
    expect((await project.call('DELETE', `/files/${report}`)).status).toBe(200);
    expect(await expectTotalsMatch(project, queries)).toMatchObject({
      '': 3,
      'status=ready': 2,
      [`folder_id=${folder}`]: 1,
      'folder_id=root': 2,
      'tags=a': 1,
      'tags=b': 2,
    });

    // A deleted file still in the folder is set to the root with it, and stays unlisted.
    expect((await project.call('POST', `/files/${notes}/move`, { body: { folder_id: null } })).status).toBe(
      200,
    );
    expect((await project.call('DELETE', `/folders/${folder}`)).status).toBe(204);
    expect(await expectTotalsMatch(project, FILTERS)).toMatchObject({ '': 3, 'folder_id=root': 3 });
  });

  it('count the files holding several tags through tag changes, confirms, deletes and folds', async () => {
    const project = await coffer.newProject();
    const tagsOf = (file: string, tags: string[], method: 'PUT' | 'POST' = 'PUT') =>
      project.call(method, `/files/${file}/tags`, { body: { tags } });
    const both = (await upload(project, { filename: 'both.txt', tags: ['b', 'a'] })).body.id as string;
    const all = (await upload(project, { filename: 'all.txt', tags: ['c', 'b', 'a'] })).body.id as string;
    const one = (await upload(project, { filename: 'one.txt', tags: ['a'] })).body.id as string;
    const pending = await initiate(project, { filename: 'pending.txt', tags: ['a', 'b', 'd'] });
    expect(await expectTotalsMatch(project, FILTERS)).toMatchObject({
      'tags=a&tags=b': 3,
      'tags=b&tags=a&tags=b': 3,
      'tags=a&tags=b&tags=c': 1,
    });

    // Tags added (a union) and replaced, an upload confirmed, a file deleted.
    expect((await tagsOf(one, ['c', 'b'], 'POST')).status).toBe(200);
    expect((await tagsOf(all, ['a', 'c'])).status).toBe(200);
    expect((await put(pending.upload_url, pending.bytes)).status).toBe(200);
    expect((await project.call('POST', `/files/${pending.file_id}/confirm`)).status).toBe(200);
    expect((await project.call('DELETE', `/files/${both}`)).status).toBe(200);
    const totals = await expectTotalsMatch(project, FILTERS);
    expect(totals).toMatchObject({ 'tags=a&tags=b': 2, 'tags=a&tags=b&tags=c': 1 });

    expect(await deltasOf(project.id, 'file_tag_set_deltas')).toBeGreaterThan(0);
    await coffer.services.db.query('SELECT fold_file_counts($1)', [project.id]);
    expect(await deltasOf(project.id, 'file_tag_set_deltas')).toBe(0);
    expect(await expectTotalsMatch(project, FILTERS)).toEqual(totals);

    // After the fold, changes still count: the last file holding a, b and c loses c.
    expect((await tagsOf(one, ['a', 'b'])).status).toBe(200);
    expect(await expectTotalsMatch(project, FILTERS)).toMatchObject({
      'tags=a&tags=b': 2,
      'tags=a&tags=b&tags=c': 0,
    });
  });

  it('keeps the totals when the kept changes are folded into the counts', async () => {
    const project = await coffer.newProject();
    for (const name of ['a.txt', 'b.txt', 'c.txt']) await upload(project, { filename: name });
    const before = await expectTotalsMatch(project, FILTERS);
    expect(await deltasOf(project.id)).toBeGreaterThan(0);

    await coffer.services.db.query('SELECT fold_file_counts($1)', [project.id]);
    expect(await deltasOf(project.id)).toBe(0);
    expect(await expectTotalsMatch(project, FILTERS)).toEqual(before);
    await initiate(project, { filename: 'd.txt' });
    expect((await expectTotalsMatch(project, FILTERS))['']).toBe(before['']! + 1);
  });
});
