import { describe, expect, it } from 'vitest';
import type { TestProject } from '../support/coffer.ts';
import { attempt, coffer, createToken, expectError, serveUploadTokens } from '../support/upload-tokens.ts';

serveUploadTokens();

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
