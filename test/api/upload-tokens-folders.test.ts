import { describe, expect, it } from 'vitest';
import { upload } from '../support/files.ts';
import { coffer, createToken, expectError, serveUploadTokens } from '../support/upload-tokens.ts';

serveUploadTokens();

describe('token folders', () => {
  it('creates the missing segments of folder_path and locks uploads there', async () => {
    const project = await coffer.newProject();
    const existing = (await project.call('POST', '/folders', { body: { name: 'users' } })).body;
    const token = await createToken(project, { folder_path: 'users/42/avatars' });

    const roots = (await project.call('GET', '/folders')).body.items;
    expect(roots.map((f: { id: string }) => f.id)).toEqual([existing.id]);
    const level2 = (await project.call('GET', `/folders?parent_id=${existing.id}`)).body.items;
    expect(level2).toMatchObject([{ name: '42', path: 'users/42' }]);
    const level3 = (await project.call('GET', `/folders?parent_id=${level2[0].id}`)).body.items;
    expect(level3).toMatchObject([{ name: 'avatars', path: 'users/42/avatars' }]);
    expect(token.folder_id).toBe(level3[0].id);

    const file = await upload(project, { token: token.token });
    expect(file.status).toBe(200);
    expect(file.body.folder_id).toBe(level3[0].id);

    // A second token on the same path reuses the folders.
    const again = await createToken(project, { folder_path: '/users/42/avatars/' });
    expect(again.folder_id).toBe(level3[0].id);
  });

  it('lets folder_path win over folder_id', async () => {
    const project = await coffer.newProject();
    const named = (await project.call('POST', '/folders', { body: { name: 'named' } })).body;
    const token = await createToken(project, { folder_id: named.id, folder_path: 'by-path' });
    const byPath = (await project.call('GET', '/folders')).body.items.find(
      (f: { name: string }) => f.name === 'by-path',
    );
    expect(byPath).toBeDefined();
    expect(token.folder_id).toBe(byPath.id);
    const file = await upload(project, { token: token.token });
    expect(file.body.folder_id).toBe(byPath.id);
  });

  it('uses a folder_id of the project', async () => {
    const project = await coffer.newProject();
    const folder = (await project.call('POST', '/folders', { body: { name: 'inbox' } })).body;
    const token = await createToken(project, { folder_id: folder.id });
    expect(token.folder_id).toBe(folder.id);
    expect((await upload(project, { token: token.token })).body.folder_id).toBe(folder.id);
  });

  it('refuses a folder_id of another project, or an unknown one, with 422', async () => {
    const project = await coffer.newProject();
    const other = await coffer.newProject();
    const foreign = (await other.call('POST', '/folders', { body: { name: 'theirs' } })).body;
    for (const folderId of [foreign.id, 'fld_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'nonsense']) {
      const reply = await project.call('POST', '/upload-tokens', { body: { folder_id: folderId } });
      expectError(reply, 422, 'VALIDATION_ERROR');
      expect(reply.body.error.details.field).toBe('folder_id');
    }
  });
});
