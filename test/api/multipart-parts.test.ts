import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { findFile } from '../../src/modules/files/repo.ts';
import { findSession, findSessionAndFile } from '../../src/modules/uploads/session-repo.ts';
import { settledChecksum } from '../support/files.ts';
import { coffer, complete, MiB, md5, putPart, serveMultipart, start } from '../support/multipart.ts';

serveMultipart();

describe('multipart upload', () => {
  it('replaces a part uploaded again', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 4);
    await putPart(project, session.upload_id, 1, Buffer.from('old!'));
    const etag = await putPart(project, session.upload_id, 1, Buffer.from('new!'));
    const listed = await project.call('GET', `/files/upload/multipart/${session.upload_id}`);
    expect(listed.body.parts).toEqual([{ part_number: 1, etag, size_bytes: 4 }]);
    const done = await complete(project, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.status).toBe(200);
    const download = await project.call('GET', `/files/${session.file_id}/download`);
    expect(await (await fetch(download.body.url)).text()).toBe('new!');
  });

  it('resumes after a simulated crash: lists what is stored and sends only the rest', async () => {
    const project = await coffer.newProject();
    const parts = [randomBytes(5 * MiB), randomBytes(10)];
    const session = await start(project, 5 * MiB + 10);
    await putPart(project, session.upload_id, 1, parts[0]!);
    // The client crashes here and forgets every ETag; a new client asks what is there.
    const listed = await project.call('GET', `/files/upload/multipart/${session.upload_id}`);
    expect(listed.status).toBe(200);
    expect(listed.body).toMatchObject({
      upload_id: session.upload_id,
      file_id: session.file_id,
      status: 'open',
    });
    expect(listed.body.parts).toEqual([{ part_number: 1, etag: md5(parts[0]!), size_bytes: 5 * MiB }]);
    const second = await putPart(project, session.upload_id, 2, parts[1]!);
    const done = await complete(project, session.upload_id, [
      { part_number: 1, etag: listed.body.parts[0].etag },
      { part_number: 2, etag: second.replaceAll('"', '') },
    ]);
    expect(done.status).toBe(200);
    expect(await settledChecksum(coffer, project, session.file_id)).toBe(
      createHash('sha256').update(Buffer.concat(parts)).digest('hex'),
    );
  });

  it('checks part numbers and TTLs', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 10);
    for (const query of ['part=x', '', 'part=1.5', 'part=1&ttl=soon']) {
      const reply = await project.call(
        'GET',
        `/files/upload/multipart/${session.upload_id}/part-url?${query}`,
      );
      expect(reply.status, query).toBe(400);
      expect(reply.body.error.code).toBe('BAD_REQUEST');
    }
    // A readable part number outside 1..10000 breaks a rule: 422 naming the field.
    for (const query of ['part=0', 'part=-1', 'part=10001']) {
      const reply = await project.call(
        'GET',
        `/files/upload/multipart/${session.upload_id}/part-url?${query}&size=1`,
      );
      expect(reply.status, query).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'part' } });
    }
    for (const query of ['part=1&ttl=59', 'part=1&ttl=86401']) {
      const reply = await project.call(
        'GET',
        `/files/upload/multipart/${session.upload_id}/part-url?${query}&size=1`,
      );
      expect(reply.status, query).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'ttl' } });
    }
    const reply = await project.call(
      'GET',
      `/files/upload/multipart/${session.upload_id}/part-url?part=10000&ttl=120&size=1`,
    );
    expect(reply.body.part_number).toBe(10000);
    expect(Math.round((new Date(reply.body.expires_at).getTime() - Date.now()) / 1000)).toBe(120);

    const strict = await coffer.newProject({ require_signed_urls: true });
    const strictSession = await start(strict, 10);
    for (const ttl of ['120', '30']) {
      const ignored = await strict.call(
        'GET',
        `/files/upload/multipart/${strictSession.upload_id}/part-url?part=1&ttl=${ttl}&size=1`,
      );
      expect(ignored.status).toBe(200);
      expect(Math.round((new Date(ignored.body.expires_at).getTime() - Date.now()) / 1000)).toBe(
        coffer.config.uploadUrlTtlSeconds,
      );
    }
  });

  it('applies the project checks to total_size_bytes and goes to processing when scanning', async () => {
    const small = await coffer.newProject({ max_file_size_bytes: 100 });
    const tooBig = await small.call('POST', '/files/upload/multipart/start', {
      body: { filename: 'a.bin', content_type: 'application/octet-stream', total_size_bytes: 101 },
    });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error).toMatchObject({
      code: 'FILE_TOO_LARGE',
      details: { field: 'total_size_bytes' },
    });
    const images = await coffer.newProject({ allowed_mime_types: 'image/*' });
    const wrongType = await images.call('POST', '/files/upload/multipart/start', {
      body: { filename: 'a.bin', content_type: 'application/octet-stream', total_size_bytes: 1 },
    });
    expect(wrongType.status).toBe(422);

    const scanning = await coffer.newProject({ virus_scan_enabled: true });
    const session = await start(scanning, 3);
    const etag = await putPart(scanning, session.upload_id, 1, Buffer.from('abc'));
    const done = await complete(scanning, session.upload_id, [{ part_number: 1, etag }]);
    expect(done.body.status).toBe('processing');
  });

  it('is invisible to other projects', async () => {
    const a = await coffer.newProject();
    const b = await coffer.newProject();
    const session = await start(a, 10);
    const reply = await b.call('GET', `/files/upload/multipart/${session.upload_id}`);
    expect(reply.status).toBe(404);
    expect((await a.call('GET', '/files/upload/multipart/session_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status).toBe(
      404,
    );
  });

  it('loads a session with its file in one query as each is read alone', async () => {
    const project = await coffer.newProject();
    const session = await start(project, 3);
    const { db } = coffer.services;
    const alone = {
      session: await findSession(db, project.id, session.upload_id),
      file: await findFile(db, project.id, session.file_id),
    };
    expect(alone.session?.expires_at).toBeInstanceOf(Date);
    // With the key S3 shows its file at (the file's name, at the top of the bucket).
    expect(await findSessionAndFile(db, project.id, session.upload_id)).toEqual({
      ...alone,
      key: alone.file?.filename,
    });
    expect(await findSessionAndFile(db, project.id, 'session_01J00000000000000000000000')).toBeUndefined();
  });
});
