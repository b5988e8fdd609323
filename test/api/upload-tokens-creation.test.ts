import { describe, expect, it } from 'vitest';
import { coffer, createToken, expectError, serveUploadTokens, sha256 } from '../support/upload-tokens.ts';

serveUploadTokens();

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
