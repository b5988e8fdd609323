import { describe, expect, it } from 'vitest';
import { initiate, put } from '../support/files.ts';
import {
  attempt,
  coffer,
  createToken,
  expectError,
  serveUploadTokens,
  sha256,
} from '../support/upload-tokens.ts';

serveUploadTokens();

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
