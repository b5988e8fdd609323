import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SettingsInput } from '../../src/modules/projects/schemas.ts';
import { type Reply, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, put, upload } from '../support/files.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

function expectError(reply: Reply, status: number, code: string) {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body.error.code).toBe(code);
  expect(reply.body.error.request_id).toEqual(expect.any(String));
}

interface Token {
  token: string;
  expires_at: string;
  constraints: { max_size: number; allowed_mime_types: string[]; max_files: number };
  folder_id: string | null;
}

/** Creates a token with the project's key (201 expected). */
async function createToken(project: TestProject, body: Record<string, unknown> = {}): Promise<Token> {
  const reply = await project.call('POST', '/upload-tokens', { body });
  if (reply.status !== 201)
    throw new Error(`token creation failed: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

/** An initiate request with a token; `size_bytes` is declared without sending bytes. */
const attempt = (project: TestProject, token: string, body: Record<string, unknown> = {}) =>
  project.call('POST', '/files/upload', {
    token,
    body: { filename: 'photo.png', content_type: 'image/png', size_bytes: 10, ...body },
  });

const fileOf = async (project: TestProject, fileId: string) => {
  const reply = await project.call('GET', `/files/${fileId}`);
  expect(reply.status).toBe(200);
  return reply.body;
};

const secondsFromNow = (iso: string) => (new Date(iso).getTime() - Date.now()) / 1000;

describe('creating an upload token', () => {
  it('applies every default and answers the token, expires_at and the effective constraints', async () => {
    const project = await coffer.newProject();
    const reply = await project.call('POST', '/upload-tokens', { body: {} });
    expect(reply.status).toBe(201);
    expect(reply.body.token).toMatch(/^coffer_upload_token_[A-Za-z0-9_-]{32,}$/);
    expect(reply.body.constraints).toEqual({
      max_size: 104_857_600,
      allowed_mime_types: ['*/*'],
      max_files: 10,
    });
    expect(reply.body.expires_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    expect(Math.abs(secondsFromNow(reply.body.expires_at) - 3600)).toBeLessThan(10);
  });

  it('gives each token a different secret', async () => {
    const project = await coffer.newProject();
    const a = await createToken(project);
    const b = await createToken(project);
    expect(a.token).not.toBe(b.token);
  });

  it('takes every field the caller sets', async () => {
    const project = await coffer.newProject();
    const token = await createToken(project, {
      max_size: 5000,
      allowed_mime_types: ['image/png', 'Text/*'],
      max_files: 3,
      folder_path: 'avatars',
      metadata: { source: 'signup' },
      tags: ['avatar'],
      expires_in: 60,
      owner_user_id: 'user_42',
      owner_org_id: 'acme',
    });
    expect(token.constraints).toEqual({
      max_size: 5000,
      allowed_mime_types: ['image/png', 'text/*'],
      max_files: 3,
    });
    expect(Math.abs(secondsFromNow(token.expires_at) - 60)).toBeLessThan(10);
    const longest = await createToken(project, { expires_in: 86_400 });
    expect(Math.abs(secondsFromNow(longest.expires_at) - 86_400)).toBeLessThan(10);
  });

  it('stores only a hash of the token', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project, { metadata: { a: 1 }, tags: ['t'] });
    const rows = await coffer.services.db.query<Record<string, unknown>>(
      'SELECT * FROM upload_tokens WHERE project_id = $1',
      [project.id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).toBe(sha256(token));
    const opaque = token.slice('coffer_upload_token_'.length);
    const stored = JSON.stringify(rows);
    expect(stored).not.toContain(token);
    expect(stored).not.toContain(opaque);
    const anywhere = await coffer.services.db.query(
      'SELECT id FROM upload_tokens WHERE position($1 in upload_tokens::text) > 0',
      [opaque],
    );
    expect(anywhere).toEqual([]);
  });

  it.each([
    ['expires_in below 60', { expires_in: 59 }, 'expires_in'],
    ['expires_in above 86400', { expires_in: 86_401 }, 'expires_in'],
    ['expires_in 0', { expires_in: 0 }, 'expires_in'],
    ['a negative expires_in', { expires_in: -3600 }, 'expires_in'],
    ['max_size 0', { max_size: 0 }, 'max_size'],
    ['a negative max_size', { max_size: -1 }, 'max_size'],
    ['max_files 0', { max_files: 0 }, 'max_files'],
    ['a negative max_files', { max_files: -5 }, 'max_files'],
    ['an empty MIME list', { allowed_mime_types: [] }, 'allowed_mime_types'],
    ['a MIME entry without a subtype', { allowed_mime_types: ['image'] }, 'allowed_mime_types'],
    ['a MIME entry with a wildcard type', { allowed_mime_types: ['*/png'] }, 'allowed_mime_types'],
    ['a MIME entry with spaces inside', { allowed_mime_types: ['image/ png'] }, 'allowed_mime_types'],
    [
      'a MIME entry with parameters',
      { allowed_mime_types: ['text/plain; charset=utf-8'] },
      'allowed_mime_types',
    ],
    ['an empty MIME entry', { allowed_mime_types: ['image/png', ''] }, 'allowed_mime_types'],
    ['a MIME entry of several slashes', { allowed_mime_types: ['image/png/x'] }, 'allowed_mime_types'],
    ['an empty tag', { tags: ['ok', ' '] }, 'tags'],
    ['a folder_path naming no folder', { folder_path: '/' }, 'folder_path'],
    ['a folder_path with a dot-dot segment', { folder_path: 'a/../b' }, 'folder_path'],
  ])('refuses %s with 422 VALIDATION_ERROR', async (_what, body, field) => {
    const project = await coffer.newProject();
    const reply = await project.call('POST', '/upload-tokens', { body });
    expectError(reply, 422, 'VALIDATION_ERROR');
    expect(reply.body.error.details.field).toBe(field);
    const rows = await coffer.services.db.query('SELECT id FROM upload_tokens WHERE project_id = $1', [
      project.id,
    ]);
    expect(rows).toEqual([]);
  });

  it.each([
    ['a string expires_in', { expires_in: '3600' }, 'expires_in'],
    ['a fractional expires_in', { expires_in: 60.5 }, 'expires_in'],
    ['a string max_size', { max_size: '1000' }, 'max_size'],
    ['a boolean max_files', { max_files: true }, 'max_files'],
    ['a string allowed_mime_types', { allowed_mime_types: 'image/*' }, 'allowed_mime_types'],
    ['a number in allowed_mime_types', { allowed_mime_types: [5] }, 'allowed_mime_types.0'],
    ['an array metadata', { metadata: [1, 2] }, 'metadata'],
    ['a string tags', { tags: 'a' }, 'tags'],
    ['a numeric folder_id', { folder_id: 7 }, 'folder_id'],
    ['an unknown field', { max_uploads: 3 }, 'max_uploads'],
  ])('refuses %s with 400 BAD_REQUEST', async (_what, body, field) => {
    const project = await coffer.newProject();
    const reply = await project.call('POST', '/upload-tokens', { body });
    expectError(reply, 400, 'BAD_REQUEST');
    expect(reply.body.error.details.field).toBe(field);
  });

  it('refuses malformed JSON with 400 BAD_REQUEST', async () => {
    const project = await coffer.newProject();
    const reply = await project.call('POST', '/upload-tokens', { body: '{"max_files": ' });
    expectError(reply, 400, 'BAD_REQUEST');
  });

  it('requires the upload_tokens:create scope, and the project of the key', async () => {
    const project = await coffer.newProject(undefined, ['files:upload', 'files:read']);
    expectError(await project.call('POST', '/upload-tokens', { body: {} }), 403, 'INSUFFICIENT_SCOPE');
    const other = await coffer.newProject();
    const foreign = await coffer.call('POST', `/v1/projects/${project.id}/upload-tokens`, {
      token: other.key,
      body: {},
    });
    expectError(foreign, 404, 'NOT_FOUND');
    expectError(
      await project.call('POST', '/upload-tokens', { token: '', body: {} }),
      401,
      'UNAUTHENTICATED',
    );
  });
});

describe('validation against the project', () => {
  const tokenReply = (project: TestProject, body: Record<string, unknown>) =>
    project.call('POST', '/upload-tokens', { body });

  it('refuses a MIME entry wider than the project list (two exact types, token image/*)', async () => {
    const project = await coffer.newProject({ allowed_mime_types: 'image/png,image/jpeg' });
    const reply = await tokenReply(project, { allowed_mime_types: ['image/*'] });
    expectError(reply, 422, 'VALIDATION_ERROR');
    expect(reply.body.error.details.field).toBe('allowed_mime_types');
    expectError(await tokenReply(project, { allowed_mime_types: ['*/*'] }), 422, 'VALIDATION_ERROR');
    expectError(
      await tokenReply(project, { allowed_mime_types: ['image/png', 'image/gif'] }),
      422,
      'VALIDATION_ERROR',
    );
    const narrower = await tokenReply(project, { allowed_mime_types: ['image/jpeg'] });
    expect(narrower.status).toBe(201);
    expect(narrower.body.constraints.allowed_mime_types).toEqual(['image/jpeg']);
  });

  it('accepts a MIME entry covered by a project wildcard (project image/*, token image/jpeg)', async () => {
    const project = await coffer.newProject({ allowed_mime_types: 'image/*' });
    const reply = await tokenReply(project, { allowed_mime_types: ['image/jpeg'] });
    expect(reply.status).toBe(201);
    expect(reply.body.constraints.allowed_mime_types).toEqual(['image/jpeg']);
    expect((await tokenReply(project, { allowed_mime_types: ['image/*'] })).status).toBe(201);
    expectError(await tokenReply(project, { allowed_mime_types: ['video/mp4'] }), 422, 'VALIDATION_ERROR');
  });

  it('refuses a max_size above max_file_size_bytes and accepts one at or below it', async () => {
    const project = await coffer.newProject({ max_file_size_bytes: 1000 });
    const above = await tokenReply(project, { max_size: 1001 });
    expectError(above, 422, 'VALIDATION_ERROR');
    expect(above.body.error.details.field).toBe('max_size');
    expect((await tokenReply(project, { max_size: 1000 })).body.constraints.max_size).toBe(1000);
    expect((await tokenReply(project, { max_size: 10 })).body.constraints.max_size).toBe(10);
  });

  it('gives an omitted field the narrower of its default and the project limit', async () => {
    const project = await coffer.newProject({
      allowed_mime_types: 'image/*',
      max_file_size_bytes: 10_485_760,
    });
    const token = await createToken(project);
    expect(token.constraints).toEqual({
      max_size: 10_485_760,
      allowed_mime_types: ['image/*'],
      max_files: 10,
    });

    const roomy = await coffer.newProject({ max_file_size_bytes: 200 * 1024 * 1024 });
    expect((await createToken(roomy)).constraints).toEqual({
      max_size: 104_857_600,
      allowed_mime_types: ['*/*'],
      max_files: 10,
    });
  });

  it('makes the token list the only MIME gate when the project has none', async () => {
    const project = await coffer.newProject();
    const textOnly = await createToken(project, { allowed_mime_types: ['text/plain'] });
    const refused = await attempt(project, textOnly.token);
    expectError(refused, 422, 'VALIDATION_ERROR');
    expect(refused.body.error.details.field).toBe('content_type');
    expect(
      (await attempt(project, textOnly.token, { filename: 'a.txt', content_type: 'text/plain' })).status,
    ).toBe(201);

    const any = await createToken(project);
    const odd = await attempt(project, any.token, {
      filename: 'a.thing',
      content_type: 'application/x-thing',
    });
    expect(odd.status).toBe(201);
  });

  it('still applies a project list set after the token was made', async () => {
    const project = await coffer.newProject();
    const token = await createToken(project);
    await project.call('PATCH', '', { body: { settings: { allowed_mime_types: 'text/plain' } } });
    const refused = await attempt(project, token.token);
    expectError(refused, 422, 'VALIDATION_ERROR');
    expect(refused.body.error.details.field).toBe('content_type');
  });
});

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

describe('enforcement at upload, in order', () => {
  /** A project of image/* and text/plain up to 1000 bytes, and a token of PNG and text up to 500. */
  async function setup(settings: SettingsInput = {}) {
    const project = await coffer.newProject({
      allowed_mime_types: 'image/*,text/plain',
      max_file_size_bytes: 1000,
      ...settings,
    });
    const { token } = await createToken(project, {
      max_size: 500,
      allowed_mime_types: ['image/png', 'text/plain'],
    });
    return { project, token };
  }

  it('(a) refuses a file above the token max_size with 413 FILE_TOO_LARGE', async () => {
    const { project, token } = await setup();
    expect((await attempt(project, token, { size_bytes: 500 })).status).toBe(201);
    const reply = await attempt(project, token, { size_bytes: 501 });
    expectError(reply, 413, 'FILE_TOO_LARGE');
    expect(reply.body.error.details).toMatchObject({ max_size_bytes: 500 });
  });

  it('(b) refuses a type outside the token list with 422', async () => {
    const { project, token } = await setup();
    const reply = await attempt(project, token, { filename: 'a.gif', content_type: 'image/gif' });
    expectError(reply, 422, 'VALIDATION_ERROR');
    expect(reply.body.error.details).toMatchObject({
      field: 'content_type',
      allowed_mime_types: ['image/png', 'text/plain'],
    });
  });

  it('(a) before (b): too large for the token and of a type outside its list is 413', async () => {
    const { project, token } = await setup();
    const reply = await attempt(project, token, {
      filename: 'a.gif',
      content_type: 'image/gif',
      size_bytes: 501,
    });
    expectError(reply, 413, 'FILE_TOO_LARGE');
    expect(reply.body.error.details).toMatchObject({ max_size_bytes: 500 });
  });

  it('(b) before (f): a type outside the token list and above the project max is 422 from the token', async () => {
    const { project, token } = await setup();
    // The project ceiling drops below the token's after the token was made.
    await project.call('PATCH', '', { body: { settings: { max_file_size_bytes: 100 } } });
    const reply = await attempt(project, token, {
      filename: 'a.gif',
      content_type: 'image/gif',
      size_bytes: 200,
    });
    expectError(reply, 422, 'VALIDATION_ERROR');
    expect(reply.body.error.details).toMatchObject({
      field: 'content_type',
      allowed_mime_types: ['image/png', 'text/plain'],
    });
  });

  it('(f) checks the project after the token: size, MIME list, extension', async () => {
    const { project, token } = await setup();
    await project.call('PATCH', '', {
      body: { settings: { max_file_size_bytes: 100, allowed_mime_types: 'image/*' } },
    });
    const big = await attempt(project, token, { size_bytes: 200 });
    expectError(big, 413, 'FILE_TOO_LARGE');
    expect(big.body.error.details).toMatchObject({ max_size_bytes: 100 });

    const text = await attempt(project, token, { filename: 'a.txt', content_type: 'text/plain' });
    expectError(text, 422, 'VALIDATION_ERROR');
    expect(text.body.error.details).toMatchObject({ field: 'content_type', allowed_mime_types: ['image/*'] });

    const mismatch = await attempt(project, token, { filename: 'photo.pdf', content_type: 'image/png' });
    expectError(mismatch, 422, 'VALIDATION_ERROR');
    expect(mismatch.body.error.details.field).toBe('filename');

    expect((await attempt(project, token, { size_bytes: 100 })).status).toBe(201);
  });

  it('(c) applies the token folder and ignores the folder_id the browser sends', async () => {
    const project = await coffer.newProject();
    const locked = (await project.call('POST', '/folders', { body: { name: 'locked' } })).body;
    const elsewhere = (await project.call('POST', '/folders', { body: { name: 'elsewhere' } })).body;
    const { token } = await createToken(project, { folder_id: locked.id });
    for (const folderId of [elsewhere.id, null, 'fld_01ARZ3NDEKTSV4RRFFQ69G5FAV']) {
      const reply = await attempt(project, token, { folder_id: folderId });
      expect(reply.status, JSON.stringify(reply.body)).toBe(201);
      expect((await fileOf(project, reply.body.file_id)).folder_id).toBe(locked.id);
    }
  });

  it('(d) merges the token metadata over the browser metadata, the token winning', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project, { metadata: { source: 'token', plan: 'pro' } });
    const reply = await attempt(project, token, { metadata: { source: 'browser', label: 'me' } });
    expect(reply.status).toBe(201);
    expect((await fileOf(project, reply.body.file_id)).metadata).toEqual({
      source: 'token',
      plan: 'pro',
      label: 'me',
    });
    const bare = await attempt(project, token);
    expect((await fileOf(project, bare.body.file_id)).metadata).toEqual({ source: 'token', plan: 'pro' });
  });

  it('(e) merges the token tags with the browser tags, without duplicates', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project, { tags: ['avatar', 'shared'] });
    const reply = await attempt(project, token, { tags: ['shared', 'mine', 'mine'] });
    expect(reply.status).toBe(201);
    const tags = (await fileOf(project, reply.body.file_id)).tags as string[];
    expect([...tags].sort()).toEqual(['avatar', 'mine', 'shared']);
    const bare = await attempt(project, token);
    expect([...(await fileOf(project, bare.body.file_id)).tags].sort()).toEqual(['avatar', 'shared']);
  });

  it('stamps owner_user_id and owner_org_id on every file uploaded with the token', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project, { owner_user_id: 'user_42', owner_org_id: 'org_acme' });
    for (let i = 0; i < 2; i++) {
      const file = (await upload(project, { token })).body;
      expect(file).toMatchObject({ owner_user_id: 'user_42', owner_org_id: 'org_acme' });
    }
    const byKey = (await upload(project)).body;
    expect(byKey).toMatchObject({ owner_user_id: null, owner_org_id: null });
    const anonymous = (await upload(project, { token: (await createToken(project)).token })).body;
    expect(anonymous).toMatchObject({ owner_user_id: null, owner_org_id: null });
  });

  it('validates the merged metadata against an enforced schema at initiate', async () => {
    const project = await coffer.newProject({ enforce_schema: true });
    const schema = { type: 'object', properties: { team: { type: 'string' } }, required: ['team'] };
    expect(
      (await project.call('PUT', '/metadata-schema', { body: { schema, is_active: true } })).status,
    ).toBe(200);

    const wrong = await createToken(project, { metadata: { team: 5 } });
    const refused = await attempt(project, wrong.token, { metadata: { team: 'browser' } });
    expectError(refused, 422, 'VALIDATION_ERROR');
    expect(refused.body.error.details.field).toBe('metadata');

    const right = await createToken(project, { metadata: { team: 'ops' } });
    // The browser's invalid value is overridden by the token's before validation.
    const merged = await attempt(project, right.token, { metadata: { team: 7 } });
    expect(merged.status, JSON.stringify(merged.body)).toBe(201);
    expect((await fileOf(project, merged.body.file_id)).metadata).toEqual({ team: 'ops' });

    const none = await createToken(project);
    expectError(await attempt(project, none.token), 422, 'VALIDATION_ERROR');
    expect((await attempt(project, none.token, { metadata: { team: 'x' } })).status).toBe(201);

    // Refused uploads used no slot of the token.
    const [row] = await coffer.services.db.query<{ files_used: number }>(
      'SELECT files_used FROM upload_tokens WHERE token_hash = $1',
      [sha256(wrong.token)],
    );
    expect(row!.files_used).toBe(0);
  });
});

describe('max_files', () => {
  it('holds under concurrency: 20 simultaneous initiates with max_files 3 give three 201s', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project, { max_files: 3 });
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) => attempt(project, token, { filename: `f${i}.png` })),
    );
    const created = replies.filter((r) => r.status === 201);
    const refused = replies.filter((r) => r.status !== 201);
    expect(created).toHaveLength(3);
    expect(refused).toHaveLength(17);
    for (const reply of refused) expectError(reply, 403, 'TOKEN_LIMIT_REACHED');

    const [row] = await coffer.services.db.query<{ files_used: number }>(
      'SELECT files_used FROM upload_tokens WHERE token_hash = $1',
      [sha256(token)],
    );
    expect(row!.files_used).toBe(3);
    const listed = await project.call('GET', '/files');
    expect(listed.body.total).toBe(3);
    expect(new Set(listed.body.items.map((f: { id: string }) => f.id))).toEqual(
      new Set(created.map((r) => r.body.file_id)),
    );
  });

  it('counts only admitted uploads', async () => {
    const project = await coffer.newProject({ allowed_mime_types: 'image/*,text/plain' });
    const { token } = await createToken(project, {
      max_files: 1,
      max_size: 100,
      allowed_mime_types: ['image/*'],
    });
    expectError(await attempt(project, token, { size_bytes: 101 }), 413, 'FILE_TOO_LARGE');
    expectError(
      await attempt(project, token, { filename: 'a.txt', content_type: 'text/plain' }),
      422,
      'VALIDATION_ERROR',
    );
    expectError(await attempt(project, token, { filename: 'a.txt' }), 422, 'VALIDATION_ERROR');
    expect((await attempt(project, token)).status).toBe(201);
    expectError(await attempt(project, token), 403, 'TOKEN_LIMIT_REACHED');
  });

  it('still lets the token confirm and read its files once the limit is reached', async () => {
    const project = await coffer.newProject();
    const { token } = await createToken(project, { max_files: 1 });
    const started = await initiate(project, { token });
    expectError(
      await project.call('POST', '/files/upload', {
        token,
        body: { filename: 'b.txt', content_type: 'text/plain', size_bytes: 1 },
      }),
      403,
      'TOKEN_LIMIT_REACHED',
    );
    await put(started.upload_url, started.bytes);
    const confirmed = await project.call('POST', `/files/${started.file_id}/confirm`, { token });
    expect(confirmed.status).toBe(200);
    expect((await project.call('GET', `/files/${started.file_id}`, { token })).status).toBe(200);
  });
});
