import { describe, expect, it } from 'vitest';
import { MAX_OBJECT_BYTES } from '../../../src/modules/projects/schemas.ts';
import { request, type TestProject } from '../../support/coffer.ts';
import { Exchange } from '../../support/exchange.ts';
import { sleep } from '../../support/processes.ts';
import { b64, MiB, offsetStream, tusEndpointSuite, tusHeaders } from '../../support/tus-endpoint.ts';

// The size limits the tus endpoint holds an upload to, and how its 413 names them: the largest object,
// the upload's length, the project's and the upload token's ceilings.
const { a, project, patchUpload } = tusEndpointSuite();

/** The details of a 413 for bytes past an upload's `length`. */
const pastLength = (length: number) => ({
  field: 'Upload-Length',
  max_size_bytes: length,
  limit_source: 'upload',
});

describe('tus 1.0 endpoint', () => {
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

  it('reads through the body of a PATCH it refused mid-way: a request sent after it on its connection is answered', async () => {
    const created = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': String(64 * 1024),
        'upload-metadata': `filename ${b64('c.bin')}`,
      }),
    });
    const path = new URL(created.headers.get('location')!).pathname;
    const patch = new Exchange(a.url, 'PATCH', path, {
      ...tusHeaders(project.key, { ...offsetStream, 'upload-offset': '0' }),
      'transfer-encoding': 'chunked',
    });
    // A chunk of 8 MiB, past the upload's length: refused once the length is passed, mid-chunk.
    const chunk = 8 * MiB;
    await patch.write(Buffer.concat([Buffer.from(`${chunk.toString(16)}\r\n`), Buffer.alloc(MiB)]));
    const refused = await patch.next();
    expect(refused.status).toBe(413);
    expect(refused.headers.connection).toBe('keep-alive');
    // The rest of the body, more than the server buffers, then a HEAD on the same connection, as a
    // keep-alive client sends its next request: left unread, the rest would hold the HEAD forever.
    const head = Object.entries({ host: 'coffer', ...tusHeaders(project.key) }).map(
      ([name, value]) => `${name}: ${value}\r\n`,
    );
    void patch
      .write(
        Buffer.concat([
          Buffer.alloc(chunk - MiB),
          Buffer.from(`\r\n0\r\n\r\nHEAD ${path} HTTP/1.1\r\n${head.join('')}\r\n`),
        ]),
      )
      .catch(() => undefined);
    const unanswered = sleep(10_000).then(() => ({ status: 0, headers: {} as Record<string, string> }));
    const next = await Promise.race([patch.next(), unanswered]);
    patch.close();
    expect(next.status).toBe(200);
    expect(next.headers['upload-offset']).toBe('0');
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
});
