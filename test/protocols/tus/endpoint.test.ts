import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findFile } from '../../../src/modules/files/repo.ts';
import { MAX_OBJECT_BYTES } from '../../../src/modules/projects/schemas.ts';
import { findSessionAndFile, grantOpenPart } from '../../../src/modules/uploads/session-repo.ts';
import { findUpload, findUploadWithSession } from '../../../src/protocols/tus/upload-repo.ts';
import { storage } from '../../support/backends.ts';
import { ADMIN_KEY, request, startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';

const MiB = 1024 * 1024;
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const b64 = (text: string) => Buffer.from(text).toString('base64');

// Two servers on one database and one object store: any node resumes any upload.
let a: TestCoffer;
let b: TestCoffer;
let project: TestProject;
const shared = { COFFER_DATA_DIR: mkdtempSync(join(tmpdir(), 'coffer-tus-')) };
beforeAll(async () => {
  a = await startCoffer(shared);
  b = await startCoffer(shared);
  project = await a.newProject();
});
afterAll(async () => {
  await a?.close();
  await b?.close();
});

/** Runs a tus-js-client upload to its end; answers its URL. */
function upload(data: Buffer, options: tus.UploadOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const run: tus.Upload = new tus.Upload(data, {
      retryDelays: [],
      ...options,
      onSuccess: () => resolve(run.url!),
      onError: reject,
    });
    run.start();
  });
}

const auth = (token: string) => ({ Authorization: `Bearer ${token}` });
const tusHeaders = (token: string, extra: Record<string, string> = {}) => ({
  'tus-resumable': '1.0.0',
  authorization: `Bearer ${token}`,
  ...extra,
});

/**
 * The file's SHA-256 through REST: known at once for bytes the server wrote itself, else once the
 * digest job ran (parts assembled by S3).
 */
async function checksumOf(fileId: string): Promise<string | null> {
  for (let batch = 0; batch < 100; batch++) {
    const checksum = (await project.call('GET', `/files/${fileId}`)).body.checksum_sha256;
    if (checksum !== null) return checksum;
    await a.services.pipeline.runOnce();
  }
  return null;
}

/** The file through REST once it settled: ready, with its bytes, checksum and events. */
async function expectStored(fileId: string, data: Buffer) {
  const file = await project.call('GET', `/files/${fileId}`);
  expect(file.status).toBe(200);
  expect(file.body.status).toBe('ready');
  expect(file.body.size_bytes).toBe(data.length);
  expect(await checksumOf(fileId)).toBe(sha256(data));
  const link = await project.call('GET', `/files/${fileId}/download`);
  const bytes = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
  expect(bytes.equals(data)).toBe(true);
  const events = await a.services.db.query<{ type: string }>(
    'SELECT type FROM events WHERE file_id = $1 ORDER BY created_at, id',
    [fileId],
  );
  expect(events.map((event) => event.type)).toEqual(['file.uploaded', 'file.ready']);
  return file.body;
}

/**
 * A request whose body goes chunked, without Content-Length, once the server answered 100 Continue:
 * as tus-java-client and tus-android-client send theirs.
 */
function chunked(url: string, method: string, headers: Record<string, string>, body: Buffer) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders }>((resolve, reject) => {
    const sent = httpRequest(url, {
      method,
      headers: { ...headers, expect: '100-continue', 'transfer-encoding': 'chunked' },
    });
    sent.on('continue', () => sent.end(body));
    sent.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers }));
    });
    sent.on('error', reject);
  });
}

/** A PATCH of `bytes` at `offset`, with the project's key unless `token` is given. */
const patchUpload = (url: string, offset: number, bytes: Buffer, token = project.key) =>
  request(url, 'PATCH', {
    headers: tusHeaders(token, {
      'content-type': 'application/offset+octet-stream',
      'upload-offset': String(offset),
    }),
    body: bytes,
  });

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

/** The details of a 413 for bytes past an upload's `length`. */
const pastLength = (length: number) => ({
  field: 'Upload-Length',
  max_size_bytes: length,
  limit_source: 'upload',
});

const fileIdOf = async (url: string, token = project.key) =>
  (await request(url, 'HEAD', { headers: tusHeaders(token) })).headers.get('x-coffer-file-id')!;

describe('tus 1.0 endpoint', () => {
  it('answers OPTIONS with its version, extensions and the caller’s size limit', async () => {
    const limited = await a.newProject({ max_file_size_bytes: 1000 });
    const reply = await request(`${a.url}/tus`, 'OPTIONS', { headers: auth(limited.key) });
    expect(reply.status).toBe(204);
    expect(reply.headers.get('tus-version')).toBe('1.0.0');
    expect(reply.headers.get('tus-extension')?.split(',')).toEqual(
      expect.arrayContaining([
        'creation',
        'creation-with-upload',
        'creation-defer-length',
        'termination',
        'expiration',
      ]),
    );
    expect(reply.headers.get('tus-max-size')).toBe('1000');
    const tooLarge = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(limited.key, {
        'upload-length': '1001',
        'upload-metadata': `filename ${b64('a.bin')}`,
      }),
    });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('FILE_TOO_LARGE');
  });

  it('refuses with 413 an Upload-Length past the largest object, however long, and with 400 one that is no length', async () => {
    const create = (length: string, token = project.key) =>
      request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(token, {
          'upload-length': length,
          'upload-metadata': `filename ${b64('h.bin')}`,
        }),
      });
    const pastMax = await create(String(MAX_OBJECT_BYTES + 1));
    expect(pastMax.status).toBe(413);
    for (const length of [String(Number.MAX_SAFE_INTEGER + 1), '9'.repeat(40)]) {
      const reply = await create(length);
      expect(reply.status, length).toBe(413);
      expect(reply.body.error.details).toEqual(pastMax.body.error.details);
    }
    for (const length of ['-1', '1.5', '1e3', 'x', '']) {
      expect((await create(length)).status, length).toBe(400);
    }
    // A deferred length declared with a PATCH likewise.
    const deferred = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-defer-length': '1',
        'upload-metadata': `filename ${b64('h.bin')}`,
      }),
    });
    const declared = await request(deferred.headers.get('location')!, 'PATCH', {
      headers: tusHeaders(project.key, {
        'content-type': 'application/offset+octet-stream',
        'upload-offset': '0',
        'upload-length': '9'.repeat(40),
      }),
      body: Buffer.alloc(0),
    });
    expect(declared.status).toBe(413);
  });

  it('refuses another protocol version with 412', async () => {
    const reply = await request(`${a.url}/tus`, 'POST', {
      headers: { ...auth(project.key), 'tus-resumable': '0.2.2', 'upload-length': '1' },
    });
    expect(reply.status).toBe(412);
    expect(reply.headers.get('tus-version')).toBe('1.0.0');
    // Before any credential is looked at: the request is not one the endpoint can take at all.
    const anonymous = await request(`${a.url}/tus/anything`, 'HEAD', {
      headers: { 'tus-resumable': '2.0.0' },
    });
    expect(anonymous.status).toBe(412);
    expect(anonymous.headers.get('tus-version')).toBe('1.0.0');
    expect(anonymous.headers.get('tus-resumable')).toBe('1.0.0');
  });

  it('names its version on every answer under /tus, the router’s 404s and refused URLs too', async () => {
    const answers = [
      ['HEAD', '/tus/a/b', 404],
      ['GET', '/tus/nothing/here', 404],
      ['GET', '/tus/session_x', 404],
      ['PUT', '/tus', 404],
      ['HEAD', '/tus/%zz', 400],
      ['HEAD', `/tus/${'x'.repeat(200)}`, 400],
    ] as const;
    for (const [method, path, status] of answers) {
      const reply = await request(`${a.url}${path}`, method, { headers: tusHeaders(project.key) });
      expect(reply.status, `${method} ${path}`).toBe(status);
      expect(reply.headers.get('tus-resumable'), `${method} ${path}`).toBe('1.0.0');
    }
    const preflight = await request(`${a.url}/tus/a/b`, 'OPTIONS', {
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'PATCH' },
    });
    expect(preflight.headers.get('tus-resumable')).toBe('1.0.0');
    // Only there: the REST API's answers and a path that merely begins like it do not name it.
    for (const path of ['/tusx', `/v1/projects/${project.id}/nothing`]) {
      const reply = await request(`${a.url}${path}`, 'GET', { headers: tusHeaders(project.key) });
      expect(reply.status, path).toBe(404);
      expect(reply.headers.get('tus-resumable'), path).toBeNull();
    }
  });

  it('refuses with 400, naming the key, an Upload-Metadata value that is not padded standard Base64', async () => {
    const create = (metadata: string) =>
      request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, { 'upload-length': '1', 'upload-metadata': metadata }),
      });
    // Cut, unpadded, padded in the middle, URL-safe, outside the alphabet.
    for (const value of ['Y', 'YQ', 'YQ=', 'Y=Q=', 'YQ-_', 'a.bin']) {
      const reply = await create(`filename ${b64('a.bin')},filetype ${value}`);
      expect(reply.status, value).toBe(400);
      expect(reply.body.error).toMatchObject({
        code: 'BAD_REQUEST',
        message: 'The value of Upload-Metadata key "filetype" is not Base64',
        details: { field: 'Upload-Metadata' },
      });
    }
    // Not taken for an empty filename.
    expect((await create('filename Y')).body.error.message).toBe(
      'The value of Upload-Metadata key "filename" is not Base64',
    );
    // A key without a value is taken; a key twice is not.
    expect((await create(`filename ${b64('a.bin')},flag`)).status).toBe(201);
    expect((await create(`filename ${b64('a.bin')},filename ${b64('b.bin')}`)).status).toBe(400);
  });

  it('refuses with 415, in words that fit POST and PATCH, a body of another Content-Type', async () => {
    const headers = { 'upload-length': '2', 'upload-metadata': `filename ${b64('t.txt')}` };
    const created = await request(`${a.url}/tus`, 'POST', { headers: tusHeaders(project.key, headers) });
    const wrongType = { 'content-type': 'text/plain', 'upload-offset': '0' };
    const replies = [
      await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, { ...headers, ...wrongType }),
        body: 'hi',
      }),
      await request(created.headers.get('location')!, 'PATCH', {
        headers: tusHeaders(project.key, wrongType),
        body: 'hi',
      }),
    ];
    for (const reply of replies) {
      expect(reply.status).toBe(415);
      expect(reply.body.error.message).toBe(
        'The body of a tus request is Content-Type: application/offset+octet-stream',
      );
    }
  });

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

  it('resumes on another node an upload cut mid-way, in parts and a leftover below 5 MiB', async () => {
    const data = randomBytes(13 * MiB + 123);
    const chunkSize = 2 * MiB;
    let url = '';
    await new Promise<void>((resolve, reject) => {
      const run: tus.Upload = new tus.Upload(data, {
        endpoint: `${a.url}/tus`,
        headers: auth(project.key),
        chunkSize,
        retryDelays: [],
        metadata: { filename: 'big.bin', filetype: 'application/octet-stream' },
        onChunkComplete: (_chunk, sent) => {
          if (sent >= 7 * MiB) {
            url = run.url!;
            void run.abort().then(resolve, reject);
          }
        },
        onSuccess: () => reject(new Error('not cut')),
        onError: reject,
      });
      run.start();
    });
    const path = new URL(url).pathname;
    const cut = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
    expect(cut.status).toBe(200);
    // Whole chunks only: the client's abort may have let one more chunk through, never a piece of one.
    const offset = Number(cut.headers.get('upload-offset'));
    expect(offset % chunkSize).toBe(0);
    expect(offset).toBeGreaterThanOrEqual(8 * MiB);
    expect(offset).toBeLessThan(data.length);
    expect(cut.headers.get('upload-length')).toBe(String(data.length));
    expect(Date.parse(cut.headers.get('upload-expires')!)).toBeGreaterThan(Date.now());

    // A PATCH at a stale offset changes nothing.
    const stale = await request(`${b.url}${path}`, 'PATCH', {
      headers: tusHeaders(project.key, {
        'upload-offset': String(MiB),
        'content-type': 'application/offset+octet-stream',
      }),
      body: Buffer.from('x'),
    });
    expect(stale.status).toBe(409);

    await upload(data, { uploadUrl: `${b.url}${path}`, headers: auth(project.key), chunkSize });
    await expectStored(await fileIdOf(`${b.url}${path}`), data);
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

  it('takes PATCH and DELETE as POST with X-HTTP-Method-Override', async () => {
    const created = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': '20',
        'upload-metadata': `filename ${b64('o.bin')}`,
      }),
    });
    const url = created.headers.get('location')!;
    const patched = await request(url, 'POST', {
      headers: tusHeaders(project.key, {
        'x-http-method-override': 'PATCH',
        'upload-offset': '0',
        'content-type': 'application/offset+octet-stream',
      }),
      body: Buffer.alloc(10, 7),
    });
    expect(patched.status).toBe(204);
    expect(patched.headers.get('upload-offset')).toBe('10');
    const deleted = await request(url, 'POST', {
      headers: tusHeaders(project.key, { 'x-http-method-override': 'DELETE' }),
    });
    expect(deleted.status).toBe(204);
    expect((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).status).toBe(410);
  });

  it('takes X-HTTP-Method-Override on /tus as on an upload, as tusd does: the method named, or its 404', async () => {
    const fresh = await a.newProject({ max_file_size_bytes: 1000 });
    const creation = {
      'upload-length': '5',
      'upload-metadata': `filename ${b64('v.bin')}`,
    };
    const asPost = (path: string, headers: Record<string, string>) =>
      request(`${a.url}${path}`, 'POST', { headers });
    // OPTIONS: tus's discovery, which needs neither version nor credential (the credential's limit if sent).
    for (const path of ['/tus', '/tus/session_x']) {
      const options = await asPost(path, { 'x-http-method-override': 'options' });
      expect(options.status, path).toBe(204);
      expect(options.headers.get('tus-version'), path).toBe('1.0.0');
      expect(options.headers.get('tus-extension'), path).toContain('creation');
      expect(options.headers.get('tus-resumable'), path).toBe('1.0.0');
    }
    const limited = await asPost('/tus', { ...auth(fresh.key), 'x-http-method-override': 'OPTIONS' });
    expect(limited.headers.get('tus-max-size')).toBe('1000');
    // A method /tus has no route for is answered as that method is: 404, and nothing is created.
    for (const method of ['PATCH', 'HEAD', 'DELETE', 'GET']) {
      const refused = await asPost(
        '/tus',
        tusHeaders(fresh.key, { ...creation, 'x-http-method-override': method }),
      );
      expect(refused.status, method).toBe(404);
      expect(refused.headers.get('tus-resumable'), method).toBe('1.0.0');
      expect(refused.headers.get('location'), method).toBeNull();
      expect(refused.body.error.message, method).toBe(`No route for ${method} /tus`);
    }
    // One that names no method (an empty one too) is refused, not taken for a creation.
    for (const value of ['PTACH', '']) {
      const unknown = await asPost(
        '/tus',
        tusHeaders(fresh.key, { ...creation, 'x-http-method-override': value }),
      );
      expect(unknown.status, value).toBe(400);
      expect(unknown.body.error.details, value).toEqual({ field: 'X-HTTP-Method-Override' });
    }
    const files = await a.services.db.query('SELECT id FROM files WHERE project_id = $1', [fresh.id]);
    expect(files).toEqual([]);
    // POST named as itself is a creation; HEAD on an upload answers its offset.
    const created = await asPost(
      '/tus',
      tusHeaders(fresh.key, { ...creation, 'x-http-method-override': 'POST' }),
    );
    expect(created.status).toBe(201);
    const url = new URL(created.headers.get('location')!).pathname;
    const head = await asPost(url, tusHeaders(fresh.key, { 'x-http-method-override': 'HEAD' }));
    expect(head.status).toBe(200);
    expect(head.headers.get('upload-offset')).toBe('0');
    expect(head.headers.get('upload-length')).toBe('5');
    expect((await asPost(url, tusHeaders(fresh.key))).status).toBe(400);
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

  it('refuses with 400, creating nothing, an upload of the concatenation extension it does not serve', async () => {
    const fresh = await a.newProject();
    // tus-js-client's parallelUploads: partial uploads, then a final one naming them.
    const parallel = upload(Buffer.from('sent in two partial uploads'), {
      endpoint: `${a.url}/tus`,
      headers: auth(fresh.key),
      parallelUploads: 2,
      metadata: { filename: 'whole.txt' },
      metadataForPartialUploads: { filename: 'part.txt' },
    });
    const error = (await parallel.catch((caught: unknown) => caught)) as tus.DetailedError;
    expect(error.originalResponse?.getStatus()).toBe(400);
    for (const concat of ['partial', 'final;/tus/session_a /tus/session_b']) {
      const reply = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(fresh.key, {
          'upload-length': '5',
          'upload-metadata': `filename ${b64('c.txt')}`,
          'upload-concat': concat,
        }),
      });
      expect(reply.status, concat).toBe(400);
      expect(reply.body.error.details, concat).toEqual({ field: 'Upload-Concat' });
      expect(reply.headers.get('location'), concat).toBeNull();
    }
    const files = await a.services.db.query('SELECT id FROM files WHERE project_id = $1', [fresh.id]);
    expect(files).toEqual([]);
  });

  it('refuses with 413, creating nothing, a first body longer than Upload-Length', async () => {
    const fresh = await a.newProject();
    const reply = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(fresh.key, {
        'content-type': 'application/offset+octet-stream',
        'upload-length': '5',
        'upload-metadata': `filename ${b64('long.txt')}`,
      }),
      body: Buffer.from('hello world'),
    });
    expect(reply.status).toBe(413);
    expect(reply.body.error.details).toEqual(pastLength(5));
    expect(reply.headers.get('location')).toBeNull();
    const files = await a.services.db.query('SELECT id FROM files WHERE project_id = $1', [fresh.id]);
    expect(files).toEqual([]);
  });

  it('names the upload’s length as the limit a PATCH goes past, the project’s while the length is deferred', async () => {
    const limited = await a.newProject({ max_file_size_bytes: 10 });
    const create = (length: Record<string, string>) =>
      request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(limited.key, { ...length, 'upload-metadata': `filename ${b64('l.bin')}` }),
      });
    const known = (await create({ 'upload-length': '5' })).headers.get('location')!;
    const past = await patchUpload(known, 0, Buffer.alloc(6), limited.key);
    expect(past.status).toBe(413);
    expect(past.body.error).toMatchObject({
      message: "The bytes sent exceed the upload's length of 5 bytes",
      details: pastLength(5),
    });
    const deferred = (await create({ 'upload-defer-length': '1' })).headers.get('location')!;
    const overLimit = await patchUpload(deferred, 0, Buffer.alloc(11), limited.key);
    expect(overLimit.status).toBe(413);
    expect(overLimit.body.error.details).toEqual({ ...pastLength(10), limit_source: 'project' });
  });

  it('names the limit that binds a deferred upload as a known length names it: the token’s or the project’s', async () => {
    const tokenOf = async (owner: TestProject, max_size: number) =>
      (await owner.call('POST', '/upload-tokens', { body: { max_size } })).body.token as string;
    const create = (token: string, length: Record<string, string>) =>
      request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(token, { ...length, 'upload-metadata': `filename ${b64('t.bin')}` }),
      });
    // The project's ceiling may drop below a token's once the token is made (never before).
    const cases = [
      { project: null, tokenMax: 10, limit: 10, source: 'token' },
      { project: 1000, tokenMax: 10, limit: 10, source: 'token' },
      { project: 10, tokenMax: 10, limit: 10, source: 'token' },
      { project: 10, tokenMax: 1000, limit: 10, source: 'project' },
    ];
    for (const { project: ceiling, tokenMax, limit, source } of cases) {
      const label = JSON.stringify({ ceiling, tokenMax });
      const owner = await a.newProject();
      const token = await tokenOf(owner, tokenMax);
      await owner.call('PATCH', '', { body: { settings: { max_file_size_bytes: ceiling } } });
      const expected = { field: 'Upload-Length', max_size_bytes: limit, limit_source: source };
      // As a length declared at creation is refused.
      const known = await create(token, { 'upload-length': String(limit + 1) });
      expect(known.status, label).toBe(413);
      expect(known.body.error.details, label).toEqual(expected);
      // Bytes past the limit, and a length past it declared with a PATCH.
      const bytes = (await create(token, { 'upload-defer-length': '1' })).headers.get('location')!;
      const past = await patchUpload(bytes, 0, Buffer.alloc(limit + 1), token);
      expect(past.status, label).toBe(413);
      expect(past.body.error.details, label).toEqual(expected);
      expect(past.body.error.message, label).toBe(`The file exceeds the ${source} limit of ${limit} bytes`);
      const declared = await request(bytes, 'PATCH', {
        headers: tusHeaders(token, {
          'content-type': 'application/offset+octet-stream',
          'upload-offset': '0',
          'upload-length': String(limit + 1),
        }),
        body: Buffer.alloc(0),
      });
      expect(declared.status, label).toBe(413);
      expect(declared.body.error.details, label).toEqual(expected);
    }
    // An upload keeps the limit it was made with: a ceiling lowered since is not the one it goes past.
    const lowered = await a.newProject({ max_file_size_bytes: 20 });
    const made = (await create(lowered.key, { 'upload-defer-length': '1' })).headers.get('location')!;
    await lowered.call('PATCH', '', { body: { settings: { max_file_size_bytes: 10 } } });
    const pastMade = await patchUpload(made, 0, Buffer.alloc(21), lowered.key);
    expect(pastMade.status).toBe(413);
    expect(pastMade.body.error.details).toEqual({ ...pastLength(20), limit_source: 'project' });
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

  describe('tus uploads written from several nodes', () => {
    const offsetStream = { 'content-type': 'application/offset+octet-stream' };
    const patchAt = (node: TestCoffer, path: string, offset: number, bytes: Buffer) =>
      patchUpload(`${node.url}${path}`, offset, bytes);
    async function created(length: number) {
      const reply = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, {
          'upload-length': String(length),
          'upload-metadata': `filename ${b64('x.bin')}`,
        }),
      });
      expect(reply.status).toBe(201);
      return {
        path: new URL(reply.headers.get('location')!).pathname,
        fileId: reply.headers.get('x-coffer-file-id')!,
      };
    }

    /** A PATCH at offset 0 announcing `size` bytes, whose body the test writes (or not) itself. */
    const openPatch = (path: string, size: number) =>
      httpRequest(`${a.url}${path}`, {
        method: 'PATCH',
        headers: {
          ...tusHeaders(project.key, { ...offsetStream, 'upload-offset': '0' }),
          'content-length': String(size),
        },
      });

    it('completes with the right SHA-256 an upload whose server restarted between PATCHes', async () => {
      const data = randomBytes(12 * MiB + 5);
      const { path, fileId } = await created(data.length);
      const before = await startCoffer(shared);
      try {
        expect((await patchAt(before, path, 0, data.subarray(0, 6 * MiB))).status).toBe(204);
      } finally {
        await before.close();
      }
      // A new process: nothing of the upload in memory, its first part only on disk.
      const after = await startCoffer(shared);
      try {
        expect((await patchAt(after, path, 6 * MiB, data.subarray(6 * MiB, 12 * MiB))).status).toBe(204);
        expect((await patchAt(after, path, 12 * MiB, data.subarray(12 * MiB))).status).toBe(204);
      } finally {
        await after.close();
      }
      await expectStored(fileId, data);
    });

    it('keeps the whole parts of a long PATCH whose connection drops', async () => {
      const size = 40 * MiB;
      const { path, fileId } = await created(size);
      const data = randomBytes(size);
      const cut = openPatch(path, size);
      cut.on('error', () => undefined);
      await new Promise<void>((resolve) => cut.write(data.subarray(0, 36 * MiB), () => resolve()));
      // The server has read what it was sent (it stores parts of 16 MiB as they fill): then the client goes.
      let offset = 0;
      for (let tries = 0; tries < 100 && offset < 32 * MiB; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const head = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
        offset = Number(head.headers.get('upload-offset'));
      }
      cut.destroy();
      expect(offset).toBe(32 * MiB);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const rest = await patchAt(b, path, offset, data.subarray(offset));
      expect(rest.status, JSON.stringify(rest.body)).toBe(204);
      await expectStored(fileId, data);
    });

    it('lets one of two PATCHes at the same offset win, the other refused', async () => {
      const half = 6 * MiB;
      const { path, fileId } = await created(2 * half);
      const first = randomBytes(half);
      const second = randomBytes(half);
      const replies = await Promise.all([patchAt(a, path, 0, first), patchAt(b, path, 0, second)]);
      const statuses = replies.map((reply) => reply.status);
      expect(statuses.filter((status) => status === 204)).toHaveLength(1);
      expect([409, 423]).toContain(statuses.find((status) => status !== 204));
      const winner = statuses[0] === 204 ? first : second;
      const rest = randomBytes(half);
      expect((await patchAt(b, path, half, rest)).status).toBe(204);
      await expectStored(fileId, Buffer.concat([winner, rest]));
    });

    it('reads an upload with its session and file in one statement, as the separate lookups read them', async () => {
      const { db } = a.services;
      const separately = async (id: string) => {
        const upload = await findUpload(db, project.id, id);
        if (!upload) return undefined;
        if (upload.session_id === null)
          return { upload, session: undefined, file: await findFile(db, project.id, upload.file_id) };
        const found = await findSessionAndFile(db, project.id, upload.session_id);
        return { upload, session: found?.session, file: found?.file };
      };
      const expectSame = async (path: string) => {
        const id = path.split('/').pop()!;
        const joined = await findUploadWithSession(db, project.id, id);
        expect(joined).toBeDefined();
        expect(joined).toEqual(await separately(id));
        return joined!;
      };
      const open = await created(12 * MiB);
      expect((await patchAt(a, open.path, 0, randomBytes(6 * MiB))).status).toBe(204);
      const read = await expectSame(open.path);
      expect(read.session?.status).toBe('open');
      expect(read.upload.parts).toHaveLength(1);
      expect(read.file?.id).toBe(open.fileId);
      expect((await patchAt(a, open.path, 6 * MiB, randomBytes(6 * MiB))).status).toBe(204);
      expect((await expectSame(open.path)).session?.status).toBe('completed');
      const ended = await created(10);
      expect(
        (await request(`${a.url}${ended.path}`, 'DELETE', { headers: tusHeaders(project.key) })).status,
      ).toBe(204);
      expect((await expectSame(ended.path)).session?.status).toBe('aborted');
      const atOnce = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, {
          ...offsetStream,
          'upload-length': '3',
          'upload-metadata': `filename ${b64('once.bin')}`,
        }),
        body: Buffer.from('abc'),
      });
      const once = await expectSame(new URL(atOnce.headers.get('location')!).pathname);
      expect(once.session).toBeUndefined();
      expect(once.file?.status).not.toBe('uploading');
      expect(await findUploadWithSession(db, project.id, 'session_unknown')).toBeUndefined();
      const other = await a.newProject();
      expect(await findUploadWithSession(db, other.id, open.path.split('/').pop()!)).toBeUndefined();
    });

    it('reads the upload, its session and its file in one statement before a PATCH takes its lock', async () => {
      const { path } = await created(12 * MiB);
      const id = path.split('/').pop()!;
      const { db } = a.services;
      const query = db.query.bind(db);
      /** The statements of `patching` about the upload (other work of the node aside) before it was locked. */
      async function beforeLock(patching: Promise<{ status: number }>) {
        const statements: string[] = [];
        db.query = ((sql: string, params?: unknown[]) => {
          if (params?.includes(id)) statements.push(sql);
          return query(sql, params);
        }) as typeof db.query;
        try {
          expect((await patching).status).toBe(204);
        } finally {
          db.query = query;
        }
        const locked = statements.findIndex((sql) => sql.startsWith('UPDATE tus_uploads SET lock_id'));
        expect(locked).toBeGreaterThan(-1);
        return statements.slice(0, locked);
      }
      // The first part, written once locked, and the last, staged while the lock is taken.
      expect(await beforeLock(patchAt(a, path, 0, randomBytes(6 * MiB)))).toEqual([
        expect.stringMatching(/FROM tus_uploads u\s+LEFT JOIN multipart_sessions s/),
      ]);
      expect(await beforeLock(patchAt(a, path, 6 * MiB, randomBytes(6 * MiB)))).toHaveLength(1);
    });

    it('grants a part in one statement only to an open session, within twice its total, never shrinking', async () => {
      const { path } = await created(10 * MiB);
      const sessionId = path.split('/').pop()!;
      const grant = (partNumber: number, size: number) =>
        grantOpenPart(a.services.db, sessionId, partNumber, size, 2);
      const grants = async () =>
        (
          await a.services.db.query<{ part_grants: Record<string, number> }>(
            'SELECT part_grants FROM multipart_sessions WHERE id = $1',
            [sessionId],
          )
        )[0]!.part_grants;
      expect(await grant(2, 8 * MiB)).toBe(true);
      expect(await grant(2, 6 * MiB)).toBe(true);
      expect(await grants()).toEqual({ '2': 8 * MiB });
      expect(await grant(3, 10 * MiB + 1)).toBe(false); // more than the total
      expect(await grant(3, 10 * MiB)).toBe(true);
      expect(await grant(4, 2 * MiB + 1)).toBe(false); // past twice the total with the others
      expect(await grants()).toEqual({ '2': 8 * MiB, '3': 10 * MiB });
      expect((await request(`${a.url}${path}`, 'DELETE', { headers: tusHeaders(project.key) })).status).toBe(
        204,
      );
      expect(await grant(4, MiB)).toBe(false);
    });

    it('drops the bytes of a PATCH refused once they were being written', async () => {
      const part = 6 * MiB;
      const { path, fileId } = await created(3 * part);
      const head = randomBytes(part);
      expect((await patchAt(a, path, 0, head)).status).toBe(204);
      // Both are second parts, written while their lock is awaited: one wins, the other is refused.
      const first = randomBytes(part);
      const second = randomBytes(part);
      const replies = await Promise.all([patchAt(a, path, part, first), patchAt(b, path, part, second)]);
      const statuses = replies.map((reply) => reply.status);
      expect(statuses.filter((status) => status === 204)).toHaveLength(1);
      expect([409, 423]).toContain(statuses.find((status) => status !== 204));
      if (storage === 'local') {
        // Only the local store writes a part before its number is known (S3 takes both at once).
        const temps = join(shared.COFFER_DATA_DIR, 'objects', '.tmp');
        await expect.poll(() => readdir(temps), { timeout: 5000 }).toEqual([]);
      }
      const winner = statuses[0] === 204 ? first : second;
      const rest = randomBytes(part);
      expect((await patchAt(b, path, 2 * part, rest)).status).toBe(204);
      await expectStored(fileId, Buffer.concat([head, winner, rest]));
    });

    it('releases a stalled PATCH when a HEAD or PATCH of the upload comes from another node', async () => {
      const size = 6 * MiB;
      const { path, fileId } = await created(size);
      const data = randomBytes(size);
      // A client that sends a fifth of its body and then nothing more, its connection left open.
      const stalled = openPatch(path, size);
      const answered = new Promise<number | string>((resolve) => {
        stalled.on('response', (response) => resolve(response.statusCode!));
        stalled.on('error', (error) => resolve(error.message));
      });
      stalled.write(randomBytes(size / 5));
      await new Promise((resolve) => setTimeout(resolve, 500));

      const head = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
      expect(head.status).toBe(200);
      expect(head.headers.get('upload-offset')).toBe('0');
      // Within the few seconds a PATCH waits for a busy upload, the stalled one lets go of it.
      const resumed = await patchAt(b, path, 0, data);
      expect(resumed.status, JSON.stringify(resumed.body)).toBe(204);
      await expectStored(fileId, data);
      stalled.destroy();
      expect(await answered).not.toBe(204);
    });

    const patchChunked = (url: string, offset: number, bytes: Buffer, extra: Record<string, string> = {}) =>
      chunked(
        url,
        'PATCH',
        tusHeaders(project.key, { ...offsetStream, 'upload-offset': String(offset), ...extra }),
        bytes,
      );

    it('stores chunked PATCHes, and a POST standing in for one, at the size their end gives', async () => {
      const data = randomBytes(1024 + 20 * MiB + 3 * MiB + 5);
      const { path, fileId } = await created(data.length);
      const url = `${a.url}${path}`;
      // A few bytes that wait for a part, a long body cut into a part and bytes that wait again…
      const small = await patchChunked(url, 0, data.subarray(0, 1024));
      expect(small.status).toBe(204);
      expect(small.headers['upload-offset']).toBe('1024');
      const long = await patchChunked(url, 1024, data.subarray(1024, 1024 + 20 * MiB));
      expect(long.status).toBe(204);
      expect(long.headers['upload-offset']).toBe(String(1024 + 20 * MiB));
      // …and the last bytes as POST with X-HTTP-Method-Override, as tus-java-client may send them.
      const last = await chunked(
        url,
        'POST',
        tusHeaders(project.key, {
          ...offsetStream,
          'x-http-method-override': 'PATCH',
          'upload-offset': String(1024 + 20 * MiB),
        }),
        data.subarray(1024 + 20 * MiB),
      );
      expect(last.status).toBe(204);
      expect(last.headers['upload-offset']).toBe(String(data.length));
      await expectStored(fileId, data);
    });

    it('takes a chunked body with the creation of a deferred upload, and the length with the last one', async () => {
      const data = randomBytes(6 * MiB + 3);
      const creation = await chunked(
        `${a.url}/tus`,
        'POST',
        tusHeaders(project.key, {
          ...offsetStream,
          'upload-defer-length': '1',
          'upload-metadata': `filename ${b64('chunked.bin')}`,
        }),
        data.subarray(0, 5 * MiB),
      );
      expect(creation.status).toBe(201);
      expect(creation.headers['upload-offset']).toBe(String(5 * MiB));
      const url = creation.headers.location!;
      const last = await patchChunked(url, 5 * MiB, data.subarray(5 * MiB), {
        'upload-length': String(data.length),
      });
      expect(last.status).toBe(204);
      expect(last.headers['upload-offset']).toBe(String(data.length));
      await expectStored(creation.headers['x-coffer-file-id'] as string, data);
    });

    it('refuses with 413 a chunked body past the upload’s length, keeping only the pieces before it', async () => {
      const tiny = await created(10);
      const refused = await patchChunked(`${a.url}${tiny.path}`, 0, Buffer.alloc(11, 1));
      expect(refused.status).toBe(413);
      const head = await request(`${a.url}${tiny.path}`, 'HEAD', { headers: tusHeaders(project.key) });
      expect(head.headers.get('upload-offset')).toBe('0');

      const data = randomBytes(20 * MiB);
      const { path, fileId } = await created(data.length);
      const url = `${a.url}${path}`;
      const over = await patchChunked(url, 0, Buffer.concat([data, Buffer.from('!')]));
      expect(over.status).toBe(413);
      // The first 16 MiB were a part before the body went past the length; nothing of what followed.
      const kept = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
      expect(kept.headers.get('upload-offset')).toBe(String(16 * MiB));
      expect((await patchChunked(url, 16 * MiB, data.subarray(16 * MiB))).status).toBe(204);
      await expectStored(fileId, data);
    });

    it('refuses with 413 a chunked creation body past Upload-Length, terminating the upload made for it', async () => {
      const fresh = await a.newProject();
      for (const size of [10, 20 * MiB]) {
        const creation = await chunked(
          `${a.url}/tus`,
          'POST',
          tusHeaders(fresh.key, {
            ...offsetStream,
            'upload-length': String(size),
            'upload-metadata': `filename ${b64('long.bin')}`,
          }),
          randomBytes(size + 1),
        );
        expect(creation.status, String(size)).toBe(413);
        expect(creation.headers.location).toBeUndefined();
      }
      const files = await a.services.db.query<{ status: string }>(
        'SELECT status FROM files WHERE project_id = $1',
        [fresh.id],
      );
      expect(files.map((file) => file.status)).toEqual(['failed', 'failed']);
      expect((await fresh.call('GET', '/usage')).body.storage.reserved_bytes).toBe(0);
    });

    it('answers the offset of the first bytes a creation kept, when the rest could not be stored', async () => {
      const data = randomBytes(20 * MiB);
      const { store } = a.services;
      const { writePart } = store;
      // The second part, the last 4 MiB, fails once.
      let failed = false;
      store.writePart = async (...args) => {
        if (args[2] === 2 && !failed) {
          failed = true;
          throw new Error('store unavailable');
        }
        return writePart.apply(store, args);
      };
      let creation: Awaited<ReturnType<typeof chunked>>;
      try {
        creation = await chunked(
          `${a.url}/tus`,
          'POST',
          tusHeaders(project.key, {
            ...offsetStream,
            'upload-length': String(data.length),
            'upload-metadata': `filename ${b64('kept.bin')}`,
          }),
          data,
        );
      } finally {
        store.writePart = writePart;
      }
      expect(failed).toBe(true);
      expect(creation.status).toBe(201);
      expect(creation.headers['upload-offset']).toBe(String(16 * MiB));
      const url = creation.headers.location!;
      const head = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
      expect(head.headers.get('upload-offset')).toBe(String(16 * MiB));
      expect((await patchChunked(url, 16 * MiB, data.subarray(16 * MiB))).status).toBe(204);
      await expectStored(creation.headers['x-coffer-file-id'] as string, data);
    });

    it('answers HEAD with the offset recorded before the last PATCH, and PATCH with 423, while the upload is being completed', async () => {
      const data = randomBytes(6 * MiB);
      const { path, fileId } = await created(data.length);
      const { store } = a.services;
      const { completeMultipart } = store;
      let reached!: () => void;
      let resume!: () => void;
      const assembling = new Promise<void>((resolve) => {
        reached = resolve;
      });
      const resumed = new Promise<void>((resolve) => {
        resume = resolve;
      });
      store.completeMultipart = async (...args) => {
        reached();
        await resumed;
        return completeMultipart.apply(store, args);
      };
      try {
        const last = patchAt(a, path, 0, data);
        await assembling;
        const head = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
        expect(head.status).toBe(200);
        // Not the whole length: the completion may still fail.
        expect(head.headers.get('upload-offset')).toBe('0');
        expect(head.headers.get('upload-length')).toBe(String(data.length));
        const again = await patchAt(b, path, 0, Buffer.from('x'));
        expect(again.status).toBe(423);
        resume();
        expect((await last).status).toBe(204);
      } finally {
        resume();
        store.completeMultipart = completeMultipart;
      }
      await expectStored(fileId, data);
    });

    it('answers a finished deferred upload with its full length though its last PATCH could not record it', async () => {
      const data = randomBytes(6 * MiB + 9);
      const creation = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, {
          'upload-defer-length': '1',
          'upload-metadata': `filename ${b64('late.bin')}`,
        }),
      });
      const path = new URL(creation.headers.get('location')!).pathname;
      expect((await patchAt(a, path, 0, data.subarray(0, 6 * MiB))).status).toBe(204);
      // The lock is taken from the last PATCH while its parts are assembled: its progress is not recorded.
      const { store, db } = a.services;
      const { completeMultipart } = store;
      store.completeMultipart = async (...args) => {
        await db.query(`UPDATE tus_uploads SET lock_id = 'elsewhere' WHERE id = $1`, [path.split('/').pop()]);
        return completeMultipart.apply(store, args);
      };
      try {
        const last = await request(`${a.url}${path}`, 'PATCH', {
          headers: tusHeaders(project.key, {
            ...offsetStream,
            'upload-offset': String(6 * MiB),
            'upload-length': String(data.length),
          }),
          body: data.subarray(6 * MiB),
        });
        expect(last.status).toBe(204);
      } finally {
        store.completeMultipart = completeMultipart;
      }
      const head = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
      expect(head.status).toBe(200);
      expect(head.headers.get('upload-offset')).toBe(String(data.length));
      expect(head.headers.get('upload-length')).toBe(String(data.length));
      expect(head.headers.get('upload-defer-length')).toBeNull();
      await expectStored(creation.headers.get('x-coffer-file-id')!, data);
    });
  });
});

describe('tus from a browser (CORS)', () => {
  const origin = 'https://app.example.com';
  const list = (value: string | null) => (value ?? '').split(',').map((part) => part.trim().toLowerCase());

  it('allows the tus request headers in a preflight of /tus, and only there', async () => {
    const preflight = (path: string) =>
      fetch(`${a.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'PATCH',
          'access-control-request-headers': 'tus-resumable,upload-offset,content-type,authorization',
        },
      });
    const tus = await preflight('/tus/session_x');
    expect(tus.status).toBe(204);
    expect(list(tus.headers.get('access-control-allow-headers'))).toEqual(
      expect.arrayContaining([
        'tus-resumable',
        'upload-offset',
        'upload-length',
        'upload-metadata',
        'upload-defer-length',
      ]),
    );
    // The path decides, whatever query follows it.
    for (const path of ['/tus?x=1', '/tus/session_x?y=2']) {
      expect(list((await preflight(path)).headers.get('access-control-allow-headers'))).toContain(
        'tus-resumable',
      );
    }
    const api = await preflight(`/v1/projects/${project.id}/files`);
    expect(list(api.headers.get('access-control-allow-headers'))).not.toContain('tus-resumable');
  });

  it('allows in a preflight every header a browser’s tus client sends, as tusd’s default list does', async () => {
    const sent = [
      'authorization',
      'content-type',
      'tus-resumable',
      'upload-length',
      'upload-offset',
      'upload-metadata',
      'upload-defer-length',
      'upload-concat',
      'x-http-method-override',
      'x-requested-with',
      'x-request-id',
    ];
    for (const path of ['/tus', '/tus/session_x']) {
      const preflight = await fetch(`${a.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': sent.join(','),
        },
      });
      expect(preflight.status, path).toBe(204);
      const allowed = list(preflight.headers.get('access-control-allow-headers'));
      expect(allowed, path).toEqual(expect.arrayContaining(sent));
      // Each once, whatever its spelling (the API's X-Request-Id is tus-js-client's X-Request-ID).
      expect(allowed.length, path).toBe(new Set(allowed).size);
    }
  });

  it('exposes the tus answer headers and answers tus’s own OPTIONS', async () => {
    const options = await fetch(`${a.url}/tus`, { method: 'OPTIONS', headers: { origin } });
    expect(options.status).toBe(204);
    expect(options.headers.get('tus-version')).toBe('1.0.0');
    const created = await fetch(`${a.url}/tus`, {
      method: 'POST',
      headers: {
        ...tusHeaders(project.key, { 'upload-length': '5', 'upload-metadata': `filename ${b64('c.txt')}` }),
        origin,
      },
    });
    expect(created.status).toBe(201);
    expect(list(created.headers.get('access-control-expose-headers'))).toEqual(
      expect.arrayContaining([
        'location',
        'upload-offset',
        'upload-expires',
        'tus-resumable',
        'x-coffer-file-id',
      ]),
    );
  });
});
