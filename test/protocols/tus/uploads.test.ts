import { randomBytes } from 'node:crypto';
import * as tus from 'tus-js-client';
import { describe, expect, it } from 'vitest';
import { ADMIN_KEY, request } from '../../support/coffer.ts';
import { auth, b64, chunked, MiB, tusEndpointSuite, tusHeaders, upload } from '../../support/tus-endpoint.ts';

// Uploads through the tus endpoint, as tus-js-client and other clients send them: in one request, empty,
// with their length deferred; terminated; seen only by the credential that made them; finished ones
// deleted and their last PATCH sent again.
const { a, project, expectStored, fileIdOf, patchUpload } = tusEndpointSuite();

/** Two finished uploads of the project: one sent in three PATCHes, one written with its creation. */
async function finishedUploads() {
  const options = { endpoint: `${a.url}/tus`, headers: auth(project.key) };
  const inParts = Buffer.from('sent in three small requests');
  const atOnce = Buffer.from('sent with its creation');
  return [
    {
      data: inParts,
      url: await upload(inParts, { ...options, chunkSize: 10, metadata: { filename: 'p.txt' } }),
    },
    {
      data: atOnce,
      url: await upload(atOnce, {
        ...options,
        uploadDataDuringCreation: true,
        metadata: { filename: 'o.txt' },
      }),
    },
  ];
}

/** A new API key of the project, with files:upload. */
const anotherKey = async () =>
  (
    await a.call('POST', `/v1/projects/${project.id}/api-keys`, {
      token: ADMIN_KEY,
      body: { name: 'other', scopes: ['files:upload'] },
    })
  ).body.key as string;

describe('tus 1.0 endpoint', () => {
  it('takes a small file in one request (creation-with-upload) with its metadata', async () => {
    const data = Buffer.from('hello tus\n');
    const url = await upload(data, {
      endpoint: `${a.url}/tus`,
      headers: auth(project.key),
      uploadDataDuringCreation: true,
      metadata: { filename: 'hello.txt', filetype: 'text/plain', tags: 'a,b', metadata: '{"k":"v"}' },
    });
    expect(url.startsWith(`${a.config.publicUrl}/tus/`)).toBe(true);
    const file = await expectStored(await fileIdOf(url), data);
    expect(file.filename).toBe('hello.txt');
    expect(file.content_type).toBe('text/plain');
    expect(file.tags).toEqual(['a', 'b']);
    expect(file.metadata).toEqual({ k: 'v' });
    const head = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
    expect(head.status).toBe(200);
    expect(head.headers.get('upload-offset')).toBe(String(data.length));
    expect(head.headers.get('cache-control')).toBe('no-store');
  });

  it('takes an empty file', async () => {
    const url = await upload(Buffer.alloc(0), {
      endpoint: `${a.url}/tus`,
      headers: auth(project.key),
      metadata: { filename: 'empty.txt', filetype: 'text/plain' },
    });
    await expectStored(await fileIdOf(url), Buffer.alloc(0));
  });

  it('takes an upload whose length comes at the end (creation-defer-length)', async () => {
    const data = randomBytes(6 * MiB + 7);
    const url = await upload(data, {
      endpoint: `${a.url}/tus`,
      headers: auth(project.key),
      uploadLengthDeferred: true,
      chunkSize: 4 * MiB,
      metadata: { filename: 'deferred.bin' },
    });
    const file = await expectStored(await fileIdOf(url), data);
    expect(file.content_type).toBe('application/octet-stream');
  });

  it('terminates an upload: its file failed, the upload gone', async () => {
    const created = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': '100',
        'upload-metadata': `filename ${b64('gone.bin')}`,
      }),
    });
    expect(created.status).toBe(201);
    const url = created.headers.get('location')!;
    const fileId = created.headers.get('x-coffer-file-id')!;
    const deleted = await request(url, 'DELETE', { headers: tusHeaders(project.key) });
    expect(deleted.status).toBe(204);
    const head = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
    expect([404, 410]).toContain(head.status);
    const patch = await request(url, 'PATCH', {
      headers: tusHeaders(project.key, {
        'upload-offset': '0',
        'content-type': 'application/offset+octet-stream',
      }),
      body: Buffer.from('x'),
    });
    expect([404, 410]).toContain(patch.status);
    expect((await project.call('GET', `/files/${fileId}`)).body.status).toBe('failed');
  });

  it('shows an upload only to the credential that created it', async () => {
    const created = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': '10',
        'upload-metadata': `filename ${b64('mine.bin')}`,
      }),
    });
    const head = await request(created.headers.get('location')!, 'HEAD', {
      headers: tusHeaders(await anotherKey()),
    });
    expect(head.status).toBe(404);
    expect(head.headers.get('tus-resumable')).toBe('1.0.0');
  });

  it('forgets a finished upload on DELETE, in parts or in one request, its file kept', async () => {
    for (const { data, url } of await finishedUploads()) {
      const fileId = await fileIdOf(url);
      await tus.Upload.terminate(url, { headers: auth(project.key), retryDelays: [] });
      const head = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
      expect([404, 410]).toContain(head.status);
      await expectStored(fileId, data);
    }
  });

  it('answers an empty PATCH at the length of a finished upload with 204 and its offset, as tusd does', async () => {
    const other = await anotherKey();
    for (const { data, url } of await finishedUploads()) {
      // A client that lost the answer to its last PATCH and sends it again without bytes.
      const again = await patchUpload(url, data.length, Buffer.alloc(0));
      expect(again.status, JSON.stringify(again.body)).toBe(204);
      expect(again.headers.get('upload-offset')).toBe(String(data.length));
      expect(again.headers.get('upload-expires')).toBeNull();
      // Bytes, or another offset, still find the upload finished; another credential does not see it.
      expect((await patchUpload(url, data.length, Buffer.from('x'))).status).toBe(409);
      expect((await patchUpload(url, 0, Buffer.alloc(0))).status).toBe(409);
      expect((await patchUpload(url, data.length, Buffer.alloc(0), other)).status).toBe(404);
    }
  });

  it('answers an empty chunked PATCH at the end of a finished upload with 204, as tus-java-client ends an upload', async () => {
    // tus-java-client (and tus-android-client) open a PATCH before reading the next bytes: an upload
    // whose length is a multiple of its request size, an empty one too, ends with a PATCH without bytes.
    const empty = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': '0',
        'upload-metadata': `filename ${b64('e.bin')}`,
      }),
    });
    const uploads = [
      { data: Buffer.alloc(0), url: empty.headers.get('location')! },
      ...(await finishedUploads()),
    ];
    const offsetStream = { 'content-type': 'application/offset+octet-stream' };
    for (const { data, url } of uploads) {
      const at = (offset: number, extra: Record<string, string> = {}) =>
        tusHeaders(project.key, { ...offsetStream, 'upload-offset': String(offset), ...extra });
      for (const [method, extra] of [
        ['PATCH', {}],
        ['POST', { 'x-http-method-override': 'PATCH' }],
      ] as const) {
        const again = await chunked(url, method, at(data.length, extra), Buffer.alloc(0));
        expect(again.status, `${method} ${data.length}`).toBe(204);
        expect(again.headers['upload-offset']).toBe(String(data.length));
      }
      // Bytes, or another offset, still find the upload finished.
      expect((await chunked(url, 'PATCH', at(data.length), Buffer.from('x'))).status).toBe(409);
      if (data.length > 0) expect((await chunked(url, 'PATCH', at(0), Buffer.alloc(0))).status).toBe(409);
    }
  });
});
