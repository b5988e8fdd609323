import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TestProject } from '../support/coffer.ts';
import { initiate, put, settledChecksum, upload } from '../support/files.ts';
import { coffer, eventsOf, serveFiles } from '../support/files-api.ts';

serveFiles();

describe('two-step upload', () => {
  it('initiates, stores the bytes through the presigned URL, and confirms to ready', async () => {
    const project = await coffer.newProject();
    const started = await initiate(project, { filename: 'notes.txt', bytes: 'hello coffer' });
    expect(started.file_id).toMatch(/^file_[0-9A-Z]{26}$/);
    // Served by Coffer itself on the local store; on S3 a URL of the bucket.
    if (coffer.services.store.capabilities.servesUrls)
      expect(started.upload_url.startsWith(`${coffer.config.publicUrl}/objects/`)).toBe(true);
    expect(new Date(started.expires_at).getTime()).toBeGreaterThan(Date.now());

    const pending = await project.call('GET', `/files/${started.file_id}`);
    expect(pending.body).toMatchObject({
      status: 'uploading',
      filename: 'notes.txt',
      size_bytes: 12,
      category: 'document',
    });
    expect(await eventsOf(started.file_id)).toEqual([
      {
        type: 'file.uploaded',
        payload: {
          event: 'file.uploaded',
          timestamp: expect.any(String),
          organization_id: project.organizationId,
          project_id: project.id,
          data: {
            file_id: started.file_id,
            filename: 'notes.txt',
            size: 12,
            mime_type: 'text/plain',
            status: 'uploading',
          },
        },
      },
    ]);

    const stored = await put(started.upload_url, 'hello coffer');
    expect(stored.status).toBe(200);
    expect(stored.headers.get('etag')).toBeTruthy();

    const confirmed = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toMatchObject({ id: started.file_id, status: 'ready' });
    expect(await settledChecksum(coffer, project, started.file_id)).toBe(
      createHash('sha256').update('hello coffer').digest('hex'),
    );
    expect((await eventsOf(started.file_id)).map((e) => e.type)).toEqual(['file.uploaded', 'file.ready']);

    const again = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('INVALID_STATE');
  });

  it('keeps the file uploading when confirm finds no object, or one of the wrong size', async () => {
    const project = await coffer.newProject();
    const started = await initiate(project, { bytes: 'twelve bytes' });
    const early = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('INVALID_STATE');
    const wrongSize = await put(started.upload_url, 'short');
    // Coffer answers 400; S3 refuses the signed Content-Length with 403.
    expect(wrongSize.status).toBe(coffer.services.store.capabilities.servesUrls ? 400 : 403);
    expect((await project.call('GET', `/files/${started.file_id}`)).body.status).toBe('uploading');
  });

  it('goes to processing and queues the scan when the project scans uploads', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const confirmed = await upload(project);
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.status).toBe('processing');
    const jobs = await coffer.services.db.query('SELECT kind FROM jobs WHERE file_id = $1', [
      confirmed.body.id,
    ]);
    expect(jobs).toEqual([{ kind: 'scan' }]);
  });

  it('stores objects under generated keys, never the filename', async () => {
    const project = await coffer.newProject();
    const confirmed = await upload(project, { filename: '..%2F..%2Fetc%2Fpasswd.txt' });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.storage_key).toMatch(/^proj_[0-9A-Z]{26}\/file_[0-9A-Z]{26}\/[0-9A-Z]{26}$/);
    expect((await coffer.services.store.head(confirmed.body.storage_key))?.size).toBe(11);
  });

  it('accepts a confirm sent with a JSON content type and no body', async () => {
    const project = await coffer.newProject();
    const started = await initiate(project);
    await put(started.upload_url, started.bytes);
    const reply = await fetch(`${coffer.url}/v1/projects/${project.id}/files/${started.file_id}/confirm`, {
      method: 'POST',
      headers: { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' },
    });
    expect(reply.status).toBe(200);
  });
});

describe('project checks at initiate', () => {
  const attempt = (project: TestProject, body: Record<string, unknown>) =>
    project.call('POST', '/files/upload', {
      body: { filename: 'a.png', content_type: 'image/png', size_bytes: 10, ...body },
    });

  it('applies allowed_mime_types with wildcards', async () => {
    const project = await coffer.newProject({ allowed_mime_types: 'image/*,application/pdf' });
    expect((await attempt(project, {})).status).toBe(201);
    expect((await attempt(project, { filename: 'a.pdf', content_type: 'application/pdf' })).status).toBe(201);
    const refused = await attempt(project, { filename: 'a.txt', content_type: 'text/plain' });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'content_type' },
    });
    const any = await coffer.newProject({ allowed_mime_types: '*/*' });
    expect((await attempt(any, { filename: 'a.thing', content_type: 'application/x-thing' })).status).toBe(
      201,
    );
  });

  it('refuses an extension that contradicts the content type', async () => {
    const project = await coffer.newProject();
    const reply = await attempt(project, { filename: 'photo.png', content_type: 'application/pdf' });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'filename' } });
    expect((await attempt(project, { filename: 'photo.JPG', content_type: 'image/jpeg' })).status).toBe(201);
    expect((await attempt(project, { filename: 'README', content_type: 'text/plain' })).status).toBe(201);
  });

  it('answers 413 FILE_TOO_LARGE above max_file_size_bytes', async () => {
    const project = await coffer.newProject({ max_file_size_bytes: 100 });
    expect((await attempt(project, { size_bytes: 100 })).status).toBe(201);
    const reply = await attempt(project, { size_bytes: 101 });
    expect(reply.status).toBe(413);
    expect(reply.body.error.code).toBe('FILE_TOO_LARGE');
  });

  it.each([
    ['empty', ''],
    ['too long', `${'a'.repeat(252)}.png`],
    ['a control character', 'a\u0001.png'],
    ['a slash', 'dir/a.png'],
    ['a backslash', 'dir\\a.png'],
    ['a direction override', 'gnp\u202e.exe'],
    ['dot-dot', '..'],
  ])('refuses a filename with %s (422)', async (_what, filename) => {
    const project = await coffer.newProject();
    const reply = await attempt(project, { filename });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'filename' } });
  });

  it.each([
    [{ size_bytes: 'ten' }, 400, 'size_bytes'],
    [{ size_bytes: -1 }, 422, 'size_bytes'],
    [{ size_bytes: 9007199254740994 }, 422, 'size_bytes'],
    [{ size_bytes: 1e20 }, 422, 'size_bytes'],
    [{ filename: undefined }, 400, 'filename'],
    [{ content_type: 'not a type' }, 422, 'content_type'],
    [{ tags: ['  '] }, 422, 'tags'],
    [{ metadata: [1, 2] }, 400, 'metadata'],
    [{ folder_id: 'fld_01ARZ3NDEKTSV4RRFFQ69G5FAV' }, 422, 'folder_id'],
    [{ extra: true }, 400, 'extra'],
  ])('refuses %j before creating anything', async (body, status, field) => {
    const project = await coffer.newProject();
    const reply = await attempt(project, body);
    expect(reply.status).toBe(status);
    expect(reply.body.error.details.field).toBe(field);
    const [row] = await coffer.services.db.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM files WHERE project_id = $1',
      [project.id],
    );
    expect(row?.count).toBe(0);
  });
});
