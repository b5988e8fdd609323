import { describe, expect, it } from 'vitest';
import { collectEndedTails } from '../../../src/protocols/tus/tails.ts';
import { cofferForSuite, request } from '../../support/coffer.ts';
import { drain, PNG } from '../../support/pipeline.ts';
import { sleep } from '../../support/processes.ts';
import { b64, tusHeaders, uploadToken } from '../../support/tus-endpoint.ts';

const metadataHeader = (pairs: Record<string, string>) =>
  Object.entries(pairs)
    .map(([key, value]) => `${key} ${b64(value)}`)
    .join(',');

const coffer = cofferForSuite({ COFFER_MULTIPART_EXPIRY_SECONDS: '2' });

function create(token: string, length: number, metadata: Record<string, string> = { filename: 'a.bin' }) {
  return request(`${coffer.url}/tus`, 'POST', {
    headers: tusHeaders(token, {
      'upload-length': String(length),
      'upload-metadata': metadataHeader(metadata),
    }),
  });
}

function patch(url: string, token: string, offset: number, bytes: Buffer) {
  return request(url, 'PATCH', {
    headers: tusHeaders(token, {
      'upload-offset': String(offset),
      'content-type': 'application/offset+octet-stream',
    }),
    body: bytes,
  });
}

describe('tus uploads with an upload token', () => {
  it('holds every constraint of the token, as REST does', async () => {
    const project = await coffer.newProject();
    const constraints = {
      max_size: 100,
      allowed_mime_types: ['text/plain'],
      max_files: 1,
      folder_path: 'inbox',
      tags: ['from-token'],
      metadata: { source: 'token' },
      owner_user_id: 'user_1',
    };
    const token = await uploadToken(project, constraints);

    const tooLarge = await create(token, 101, { filename: 'a.txt', filetype: 'text/plain' });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('FILE_TOO_LARGE');
    const wrongType = await create(token, 10, { filename: 'a.png', filetype: 'image/png' });
    expect(wrongType.status).toBe(422);
    expect(wrongType.body.error.details.field).toBe('filetype');

    const created = await create(token, 10, { filename: 'a.txt', filetype: 'text/plain', tags: 'mine' });
    expect(created.status).toBe(201);
    const url = created.headers.get('location')!;
    const file = (await project.call('GET', `/files/${created.headers.get('x-coffer-file-id')}`)).body;
    expect(file.status).toBe('uploading');
    expect(file.folder_id).not.toBeNull();
    expect(file.tags.sort()).toEqual(['from-token', 'mine']);
    expect(file.metadata).toEqual({ source: 'token' });
    expect(file.owner_user_id).toBe('user_1');

    // max_files counts the upload at its creation.
    const second = await create(token, 10, { filename: 'b.txt', filetype: 'text/plain' });
    expect(second.status).toBe(403);
    expect(second.body.error.code).toBe('TOKEN_LIMIT_REACHED');

    // A token of the same owner continues it; one of another owner and the project's key do not see it.
    const sameOwner = await uploadToken(project, { owner_user_id: 'user_1' });
    const otherOwner = await uploadToken(project, { owner_user_id: 'user_2' });
    expect((await request(url, 'HEAD', { headers: tusHeaders(otherOwner) })).status).toBe(404);
    expect((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).status).toBe(404);
    expect((await patch(url, otherOwner, 0, Buffer.from('0123456789'))).status).toBe(404);
    const done = await patch(url, sameOwner, 0, Buffer.from('0123456789'));
    expect(done.status, JSON.stringify(done.body)).toBe(204);
    expect(done.headers.get('upload-offset')).toBe('10');
    expect((await project.call('GET', `/files/${file.id}`)).body.status).toBe('ready');
  });

  it('names Upload-Length, the header a client sent, in a 413 for a length past the limit', async () => {
    for (const label of ['token', 'project'] as const) {
      const project = await coffer.newProject(label === 'project' ? { max_file_size_bytes: 10 } : {});
      const token = label === 'token' ? await uploadToken(project, { max_size: 10 }) : project.key;
      const expected = { field: 'Upload-Length', max_size_bytes: 10, limit_source: label };
      // Declared at creation: an upload in parts, and one whose bytes all come with it.
      const declared = await create(token, 11);
      expect(declared.status, label).toBe(413);
      expect(declared.body.error.details, label).toEqual(expected);
      const whole = await request(`${coffer.url}/tus`, 'POST', {
        headers: tusHeaders(token, {
          'upload-length': '11',
          'upload-metadata': metadataHeader({ filename: 'a.bin' }),
          'content-type': 'application/offset+octet-stream',
        }),
        body: Buffer.alloc(11),
      });
      expect(whole.status, label).toBe(413);
      expect(whole.body.error.details, label).toEqual(expected);
      // Deferred, then declared with a PATCH.
      const deferred = await request(`${coffer.url}/tus`, 'POST', {
        headers: tusHeaders(token, {
          'upload-defer-length': '1',
          'upload-metadata': metadataHeader({ filename: 'a.bin' }),
        }),
      });
      expect(deferred.status, label).toBe(201);
      const late = await request(deferred.headers.get('location')!, 'PATCH', {
        headers: tusHeaders(token, {
          'upload-offset': '0',
          'upload-length': '11',
          'content-type': 'application/offset+octet-stream',
        }),
        body: Buffer.alloc(0),
      });
      expect(late.status, label).toBe(413);
      expect(late.body.error.details, label).toEqual(expected);
    }
  });

  it('names filetype, the Upload-Metadata key a client sent, for a type refused or not a MIME type', async () => {
    const project = await coffer.newProject({ allowed_mime_types: 'text/plain,image/png' });
    const token = await uploadToken(project, { allowed_mime_types: ['text/plain'] });
    const whole = (credential: string, metadata: Record<string, string>) =>
      request(`${coffer.url}/tus`, 'POST', {
        headers: tusHeaders(credential, {
          'upload-length': '5',
          'upload-metadata': metadataHeader(metadata),
          'content-type': 'application/offset+octet-stream',
        }),
        body: Buffer.from('hello'),
      });
    const deferred = (credential: string, metadata: Record<string, string>) =>
      request(`${coffer.url}/tus`, 'POST', {
        headers: tusHeaders(credential, {
          'upload-defer-length': '1',
          'upload-metadata': metadataHeader(metadata),
        }),
      });
    const cases = [
      { credential: project.key, filetype: 'application/pdf', refusal: 'not allowed in this project' },
      { credential: token, filetype: 'image/png', refusal: 'not allowed by the upload token' },
      { credential: project.key, filetype: 'not a type', refusal: 'must be a MIME type' },
    ];
    for (const { credential, filetype, refusal } of cases) {
      const metadata = { filename: 'a', filetype };
      // An upload in parts, one whose bytes all come with it, and one of deferred length.
      for (const reply of [
        await create(credential, 10, metadata),
        await whole(credential, metadata),
        await deferred(credential, metadata),
      ]) {
        expect(reply.status, filetype).toBe(422);
        expect(reply.body.error.details.field, filetype).toBe('filetype');
        expect(reply.body.error.message, filetype).toMatch(/^filetype /);
        expect(reply.body.error.message, filetype).toContain(refusal);
      }
    }
    // REST names its own field.
    const rest = await project.call('POST', '/files/upload', {
      body: { filename: 'a', content_type: 'application/pdf', size_bytes: 5 },
    });
    expect([rest.status, rest.body.error.details.field]).toEqual([422, 'content_type']);
  });

  it('names filetype when the bytes are not of the type it declared', async () => {
    const project = await coffer.newProject({ allowed_mime_types: 'image/png' });
    const metadata = { filename: 'a.png', filetype: 'image/png' };
    const notPng = Buffer.from('hello, not a picture');
    const whole = await request(`${coffer.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': String(notPng.length),
        'upload-metadata': metadataHeader(metadata),
        'content-type': 'application/offset+octet-stream',
      }),
      body: notPng,
    });
    const created = await create(project.key, notPng.length, metadata);
    expect(created.status).toBe(201);
    const patched = await request(created.headers.get('location')!, 'PATCH', {
      headers: tusHeaders(project.key, {
        'upload-offset': '0',
        'content-type': 'application/offset+octet-stream',
      }),
      body: notPng,
    });
    for (const reply of [whole, patched]) {
      expect(reply.status).toBe(422);
      expect(reply.body.error.message).toMatch(/does not match its type/);
      expect(reply.body.error.details).toEqual({ field: 'filetype', filetype: 'image/png' });
    }
  });

  it('refuses an API key without files:upload', async () => {
    const project = await coffer.newProject(undefined, ['files:read']);
    const reply = await create(project.key, 10);
    expect(reply.status).toBe(403);
    expect(reply.body.error.code).toBe('INSUFFICIENT_SCOPE');
  });
});

describe('tus uploads and the project', () => {
  it('reserves the quota at creation and releases it on termination', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 1000 });
    const first = await create(project.key, 600);
    expect(first.status).toBe(201);
    const refused = await create(project.key, 600);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('QUOTA_EXCEEDED');
    expect(
      (await request(first.headers.get('location')!, 'DELETE', { headers: tusHeaders(project.key) })).status,
    ).toBe(204);
    expect((await create(project.key, 600)).status).toBe(201);
  });

  it('checks the declared type against the bytes where the project scans', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const reply = await request(`${coffer.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': String(PNG.length),
        'upload-metadata': metadataHeader({ filename: 'notes.txt', filetype: 'text/plain' }),
        'content-type': 'application/offset+octet-stream',
      }),
      body: PNG,
    });
    expect(reply.status, JSON.stringify(reply.body)).toBe(201);
    expect(reply.headers.get('upload-offset')).toBe(String(PNG.length));
    const fileId = reply.headers.get('x-coffer-file-id')!;
    await drain(coffer.services.pipeline);
    const file = (await project.call('GET', `/files/${fileId}`)).body;
    expect(file.status).toBe('failed');
    expect(file.failure_reason).toMatch(/^mime_mismatch/);
  });

  it('expires an upload without progress and collects its bytes', async () => {
    const project = await coffer.newProject();
    const created = await create(project.key, 10 * 1024 * 1024);
    const url = created.headers.get('location')!;
    const first = await patch(url, project.key, 0, Buffer.alloc(1000, 1));
    expect(first.status).toBe(204);
    expect(Date.parse(first.headers.get('upload-expires')!)).toBeGreaterThan(Date.now());
    const [row] = await coffer.services.db.query<{ tail: { key: string }[] }>(
      'SELECT tail FROM tus_uploads WHERE id = $1',
      [new URL(url).pathname.split('/').pop()],
    );
    const waiting = row!.tail[0]!.key;
    expect(await coffer.services.store.head(waiting)).toBeDefined();

    await sleep(2500);
    expect((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).status).toBe(410);
    expect((await patch(url, project.key, 1000, Buffer.alloc(10))).status).toBe(410);
    await coffer.services.multipart.reap();
    const fileId = created.headers.get('x-coffer-file-id')!;
    expect((await project.call('GET', `/files/${fileId}`)).body.status).toBe('failed');
    while (await collectEndedTails(coffer.services.db, coffer.services.store));
    expect(await coffer.services.store.head(waiting)).toBeUndefined();
  });
});
