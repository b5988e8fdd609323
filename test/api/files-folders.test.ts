import { describe, expect, it } from 'vitest';
import { upload } from '../support/files.ts';
import { coffer, serveFiles } from '../support/files-api.ts';

serveFiles();

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
