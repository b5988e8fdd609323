import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { initiate, put, upload } from '../support/files.ts';
import {
  coffer,
  createToken,
  expectError,
  fileOf,
  serveUploadTokens,
  sha256,
} from '../support/upload-tokens.ts';

serveUploadTokens();

describe('using a token', () => {
  it('initiates, confirms and gets its file with Authorization: Bearer <token>', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project);
    const started = await initiate(project, { token, filename: 'a.txt', bytes: 'from a browser' });
    const pending = await project.call('GET', `/files/${started.file_id}`, { token });
    expect(pending.status).toBe(200);
    expect(pending.body).toMatchObject({ id: started.file_id, status: 'uploading' });
    expect((await put(started.upload_url, started.bytes)).status).toBe(200);
    const confirmed = await project.call('POST', `/files/${started.file_id}/confirm`, { token });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toMatchObject({ id: started.file_id, status: 'ready' });
    const got = await project.call('GET', `/files/${started.file_id}`, { token });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id: started.file_id, status: 'ready', filename: 'a.txt' });
    // The server side still sees it with its key.
    expect((await project.call('GET', `/files/${started.file_id}`)).status).toBe(200);
  });

  it('reads and confirms only the files uploaded with it (404 otherwise)', async () => {
    const project = await coffer.newProject();
    const mine = await createToken(project);
    const theirs = await createToken(project);
    const byKey = await initiate(project);
    const byOtherToken = await initiate(project, { token: theirs.token });
    for (const started of [byKey, byOtherToken]) {
      await put(started.upload_url, started.bytes);
      expectError(
        await project.call('GET', `/files/${started.file_id}`, { token: mine.token }),
        404,
        'NOT_FOUND',
      );
      expectError(
        await project.call('POST', `/files/${started.file_id}/confirm`, { token: mine.token }),
        404,
        'NOT_FOUND',
      );
    }
    // Nothing was confirmed by the refused calls.
    expect((await fileOf(project, byKey.file_id)).status).toBe('uploading');
    expect((await fileOf(project, byOtherToken.file_id)).status).toBe('uploading');
    const readyByKey = (await upload(project)).body;
    expectError(
      await project.call('GET', `/files/${readyByKey.id}`, { token: mine.token }),
      404,
      'NOT_FOUND',
    );
  });

  it('cannot use a project id other than its own', async () => {
    const project = await coffer.newProject();
    const other = await coffer.newProject();
    const { token } = await createToken(project);
    const reply = await other.call('POST', '/files/upload', {
      token,
      body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1 },
    });
    expectError(reply, 404, 'NOT_FOUND');
  });

  it('answers 403 INSUFFICIENT_SCOPE on everything but upload and get-file', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project);
    const file = (await upload(project, { token })).body;
    const folder = (await project.call('POST', '/folders', { body: { name: 'f' } })).body;
    for (const [method, path, body] of [
      ['GET', '/files', undefined],
      ['GET', '/files?limit=1', undefined],
      ['DELETE', `/files/${file.id}`, undefined],
      ['GET', `/files/${file.id}/download`, undefined],
      ['PUT', `/files/${file.id}/tags`, { tags: ['x'] }],
      ['POST', `/files/${file.id}/tags`, { tags: ['x'] }],
      ['PUT', `/files/${file.id}/metadata`, { metadata: { a: 1 } }],
      ['POST', `/files/${file.id}/metadata`, { metadata: { a: 1 } }],
      ['POST', `/files/${file.id}/move`, { folder_id: folder.id }],
      ['PUT', `/files/${file.id}/legal-hold`, {}],
      ['POST', '/upload-tokens', {}],
      ['GET', '/folders', undefined],
      ['POST', '/folders', { name: 'mine' }],
      ['GET', '', undefined],
      ['PATCH', '', { name: 'renamed' }],
      ['PUT', '/metadata-schema', { schema: { type: 'object' }, is_active: true }],
    ] as const) {
      const reply = await project.call(method, path, { token, body });
      expect(reply.status, `${method} ${path}`).toBe(403);
      expect(reply.body.error.code, `${method} ${path}`).toBe('INSUFFICIENT_SCOPE');
    }
    // Nothing changed.
    const after = await fileOf(project, file.id);
    expect(after).toMatchObject({
      deleted_at: null,
      tags: [],
      metadata: {},
      folder_id: null,
      legal_hold: false,
    });
    const tokens = await coffer.services.db.query('SELECT id FROM upload_tokens WHERE project_id = $1', [
      project.id,
    ]);
    expect(tokens).toHaveLength(1);
  });

  it('answers 401 TOKEN_EXPIRED past expires_at', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project, { expires_in: 60 });
    const started = await initiate(project, { token });
    await put(started.upload_url, started.bytes);
    expect((await project.call('GET', `/files/${started.file_id}`, { token })).status).toBe(200);

    await coffer.services.db.query(
      "UPDATE upload_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1",
      [sha256(token)],
    );
    expectError(
      await project.call('POST', '/files/upload', {
        token,
        body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1 },
      }),
      401,
      'TOKEN_EXPIRED',
    );
    expectError(
      await project.call('POST', `/files/${started.file_id}/confirm`, { token }),
      401,
      'TOKEN_EXPIRED',
    );
    expectError(await project.call('GET', `/files/${started.file_id}`, { token }), 401, 'TOKEN_EXPIRED');
    expectError(await project.call('GET', '/files', { token }), 401, 'TOKEN_EXPIRED');
    expect((await fileOf(project, started.file_id)).status).toBe('uploading');
  });

  it('answers 401 UNAUTHENTICATED to an unknown or malformed token', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    for (const token of [
      `coffer_upload_token_${randomBytes(32).toString('base64url')}`,
      'coffer_upload_token_',
      'coffer_upload_token_not.valid',
    ]) {
      expectError(
        await project.call('POST', '/files/upload', {
          token,
          body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1 },
        }),
        401,
        'UNAUTHENTICATED',
      );
      expectError(await project.call('GET', `/files/${file.id}`, { token }), 401, 'UNAUTHENTICATED');
      expectError(await project.call('POST', `/files/${file.id}/confirm`, { token }), 401, 'UNAUTHENTICATED');
    }
  });
});
