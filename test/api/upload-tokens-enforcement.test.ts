import { describe, expect, it } from 'vitest';
import type { SettingsInput } from '../../src/modules/projects/schemas.ts';
import { upload } from '../support/files.ts';
import {
  attempt,
  coffer,
  createToken,
  expectError,
  fileOf,
  serveUploadTokens,
  sha256,
} from '../support/upload-tokens.ts';

serveUploadTokens();

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
