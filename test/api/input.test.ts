import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpAnswer } from '../../src/http/error-handler.ts';
import { MAX_OBJECT_BYTES } from '../../src/modules/projects/schemas.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { upload } from '../support/files.ts';

let coffer: TestCoffer;
let project: TestProject;
let fileId: string;
beforeAll(async () => {
  coffer = await startCoffer();
  project = await coffer.newProject({ versioning_enabled: true });
  fileId = (await upload(project)).body.id;
});
afterAll(() => coffer.close());

const admin = { token: ADMIN_KEY };

function expectBadRequest(reply: { status: number; body: any }, field: string) {
  expect(reply.status, JSON.stringify(reply.body)).toBe(400);
  expect(reply.body.error).toMatchObject({
    code: 'BAD_REQUEST',
    details: { field },
    request_id: expect.any(String),
  });
}

describe('strings the database cannot store', () => {
  it.each([
    ['?q=%00', 'q'],
    ['?folder_id=%00', 'folder_id'],
    ['?tags=a&tags=b%00', 'tags.1'],
    ['?date_from=%00', 'date_from'],
  ])('answers 400 to a NUL in the query %s', async (query, field) => {
    expectBadRequest(await project.call('GET', `/files${query}`), field);
  });

  it('answers 400 to a NUL in a path parameter', async () => {
    expectBadRequest(await project.call('GET', '/files/%00'), 'file_id');
    expectBadRequest(await project.call('GET', '/folders/a%00b'), 'folder_id');
    // Under the admin key the project is looked up before any check: the database refusal is a 400 too.
    const reply = await coffer.call('GET', '/v1/projects/proj_%00', admin);
    expect(reply.status).toBe(400);
    expect(reply.body.error.code).toBe('BAD_REQUEST');
  });

  it.each([
    ['a NUL in a value', '{"metadata":{"a":"x\\u0000y"}}', 'metadata.a'],
    ['a NUL in a key', '{"metadata":{"a\\u0000":"x"}}', 'metadata'],
    ['a NUL deep inside', '{"metadata":{"list":[1,{"b":["ok","\\u0000"]}]}}', 'metadata.list.1.b.1'],
    ['a lone high surrogate', '{"metadata":{"a":"a\\ud800"}}', 'metadata.a'],
    ['a lone low surrogate in a key', '{"metadata":{"\\udc00":1}}', 'metadata'],
  ])('answers 400 to %s of a JSON body, naming the field', async (_what, body, field) => {
    const reply = await project.call('PUT', `/files/${fileId}/metadata`, { body });
    expectBadRequest(reply, field);
    expect((await project.call('GET', `/files/${fileId}`)).body.metadata).toEqual({});
  });

  it('keeps well-formed text, astral characters included', async () => {
    const reply = await project.call('PUT', `/files/${fileId}/metadata`, {
      body: '{"metadata":{"emoji":"\\ud83d\\ude00","plain":"ünïcödé"}}',
    });
    expect(reply.status).toBe(200);
    expect(reply.body.metadata).toEqual({ emoji: '😀', plain: 'ünïcödé' });
  });

  it('guards every JSON endpoint', async () => {
    expectBadRequest(
      await coffer.call('POST', '/v1/organizations', { ...admin, body: '{"name":"a\\u0000b"}' }),
      'name',
    );
    expectBadRequest(
      await project.call('POST', '/webhooks', {
        body: '{"url":"https://example.com/\\u0000","events":["file.ready"]}',
      }),
      'url',
    );
    expectBadRequest(
      await project.call('POST', '/upload-tokens', { body: '{"owner_user_id":"user\\u0000"}' }),
      'owner_user_id',
    );
    expectBadRequest(await project.call('POST', '/folders', { body: '{"name":"a\\ud800"}' }), 'name');
  });

  it('maps what PostgreSQL refuses as data to 400, not 500', () => {
    for (const code of ['22P05', '22021', '22P02', '22003']) {
      const error = Object.assign(new Error('invalid input'), { code, severity: 'ERROR' });
      expect(httpAnswer(error)).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    }
    expect(httpAnswer(Object.assign(new Error('x'), { code: '23505' }))).toMatchObject({ status: 500 });
    // A row referenced after a concurrent request removed it: the caller may simply retry.
    expect(httpAnswer(Object.assign(new Error('x'), { code: '23503' }))).toMatchObject({
      status: 409,
      code: 'CONFLICT',
    });
    // A transaction aborted for a deadlock or a serialization failure changed nothing: retry too.
    for (const code of ['40P01', '40001']) {
      expect(httpAnswer(Object.assign(new Error('x'), { code })), code).toMatchObject({
        status: 409,
        code: 'CONFLICT',
        message: expect.stringMatching(/try again/),
      });
    }
  });
});

describe('request bodies that are not JSON', () => {
  it('answers 400 BAD_REQUEST, saying JSON is expected', async () => {
    const reply = await project.call('POST', '/webhooks', {
      body: '<webhook><url>https://example.com</url></webhook>',
      headers: { 'content-type': 'application/xml' },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error.code).toBe('BAD_REQUEST');
    expect(reply.body.error.message).toMatch(/application\/json/);
  });
});

describe('sizes beyond the largest object', () => {
  const fileCount = async () => {
    const [row] = await coffer.services.db.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM files WHERE project_id = $1',
      [project.id],
    );
    return row?.count;
  };

  it.each([MAX_OBJECT_BYTES + 1, 9007199254740994, 1e20])(
    'refuses a multipart start of %d bytes with 422 before creating the file',
    async (size) => {
      const before = await fileCount();
      const reply = await project.call('POST', '/files/upload/multipart/start', {
        body: { filename: 'big.bin', content_type: 'application/octet-stream', total_size_bytes: size },
      });
      expect(reply.status).toBe(422);
      expect(reply.body.error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { field: 'total_size_bytes' },
      });
      expect(await fileCount()).toBe(before);
    },
  );

  it('refuses a single upload over 5 GiB with 422 pointing at multipart, before creating the file', async () => {
    const before = await fileCount();
    for (const [path, body] of [
      [
        '/files/upload',
        { filename: 'big.bin', content_type: 'application/octet-stream', size_bytes: 5 * 1024 ** 3 + 1 },
      ],
      [`/files/${fileId}/versions`, { size_bytes: 5 * 1024 ** 3 + 1 }],
    ] as const) {
      const reply = await project.call('POST', path, { body });
      expect(reply.status).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'size_bytes' } });
      expect(reply.body.error.message).toMatch(/multipart/);
    }
    expect(await fileCount()).toBe(before);
  });

  it('refuses new version content of such a size with 422', async () => {
    const reply = await project.call('POST', `/files/${fileId}/versions`, { body: { size_bytes: 1e20 } });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'size_bytes' } });
  });
});

describe('what is refused before any route runs, in the contract error body', () => {
  const expectError = (reply: { status: number; body: any }, status: number, code: string) => {
    expect(reply.status, JSON.stringify(reply.body)).toBe(status);
    expect(reply.body).toEqual({
      error: expect.objectContaining({ code, message: expect.any(String), request_id: expect.any(String) }),
    });
  };

  it('a path that is not valid percent-encoding, and a path segment past its length', async () => {
    const malformed = await project.call('GET', '/files/%ZZ');
    expectError(malformed, 400, 'BAD_REQUEST');
    const long = await project.call('GET', `/files/file_${'x'.repeat(200)}`);
    expectError(long, 400, 'BAD_REQUEST');
    // Answered before any hook runs, yet named as every answer is.
    for (const reply of [malformed, long]) {
      expect(reply.headers.get('x-request-id')).toBe(reply.body.error.request_id);
    }
    expect(long.body.error.details).toEqual({ location: 'params', max_length: 100 });
  });

  it('headers or a query string past the size limit, and requests that are not HTTP', async () => {
    expectError(await project.call('GET', `/files?q=${'q'.repeat(100_000)}`), 431, 'HEADERS_TOO_LARGE');
    // A body longer than its Content-Length: the parser cannot read what follows.
    const { Socket } = await import('node:net');
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = new Socket();
      let answer = '';
      socket.on('data', (chunk) => {
        answer += chunk.toString();
      });
      socket.on('close', () => resolve(answer));
      socket.on('error', reject);
      socket.connect(Number(new URL(coffer.url).port), '127.0.0.1', () =>
        socket.write('NOT HTTP AT ALL\r\n\r\n'),
      );
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)).error).toMatchObject({
      code: 'BAD_REQUEST',
      request_id: expect.stringMatching(/^req_/),
    });
  });
});

describe('JSON that would reach the prototype or nest without end', () => {
  it('refuses __proto__ and constructor.prototype keys as it refuses any unknown key', async () => {
    for (const body of [
      '{"metadata":{"__proto__":{"admin":true}}}',
      '{"constructor":{"prototype":{"x":1}}}',
    ]) {
      const reply = await project.call('PATCH', `/files/${fileId}/metadata`, { body });
      expectBadRequest(reply, 'body');
      expect(reply.body.error.message).toMatch(/__proto__/);
    }
    // A key merely named constructor is data like any other.
    const kept = await project.call('PUT', `/files/${fileId}/metadata`, {
      body: { metadata: { constructor: 'x' } },
    });
    expect(kept.status, JSON.stringify(kept.body)).toBe(200);
    expect(kept.body.metadata).toEqual({ constructor: 'x' });
  });

  it('answers 400 naming the limit to a body or metadata filter nested thousands of levels deep', async () => {
    const deep = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    for (const [method, path, body] of [
      ['PUT', `/files/${fileId}/metadata`, `{"metadata":${deep(5000)}}`],
      ['POST', '/upload-tokens', `{"metadata":${deep(5000)}}`],
      [
        'POST',
        '/files/upload',
        `{"filename":"a.txt","content_type":"text/plain","size_bytes":1,"metadata":${deep(5000)}}`,
      ],
    ] as const) {
      const reply = await project.call(method, path, { body });
      expectBadRequest(reply, 'body');
      expect(reply.body.error.details.max_depth).toBe(64);
    }
    const filter = await project.call('GET', `/files?metadata=${encodeURIComponent(deep(500))}`);
    expectBadRequest(filter, 'metadata');
    // Strings holding brackets are not nesting.
    const brackets = await project.call('PUT', `/files/${fileId}/metadata`, {
      body: { metadata: { text: '{'.repeat(500) } },
    });
    expect(brackets.status).toBe(200);
    expect(
      (await project.call('PUT', `/files/${fileId}/metadata`, { body: `{"metadata":${deep(60)}}` })).status,
    ).toBe(200);
  });
});
