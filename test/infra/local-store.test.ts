import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseDisposition } from 'content-disposition';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpAnswer, installErrorHandling } from '../../src/http/error-handler.ts';
import { objectRoutes } from '../../src/http/object-routes.ts';
import { createLocalStore, type LocalObjectStore } from '../../src/infra/storage/local/store.ts';
import {
  MAX_PART_SIZE,
  MIN_PART_SIZE,
  StoreError,
  type StoreErrorCode,
} from '../../src/infra/storage/object-store.ts';
import { writers } from '../../src/infra/storage/writer-pool.ts';

const SECRET = 'test-url-signing-secret';
/** What the store's multipart uploads here declare: more than any of them stores. */
const MULTIPART_TOTAL = 64 * 1024 * 1024;

let dir: string;
let app: FastifyInstance;
let store: LocalObjectStore;
/** The store behind the routes: it receives the uploads (the other store is another node on the same folder). */
let receiver: LocalObjectStore;
let base: string;
let counter = 0;

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const md5 = (data: Buffer) => createHash('md5').update(data).digest('hex');
const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000);
const newKey = () => `proj_test/file_${++counter}/01HZX${String(counter).padStart(6, '0')}`;
const tmpFiles = () => readdir(join(dir, '.tmp')).catch(() => [] as string[]);
/** A part that can come before others at complete: no smaller than S3 allows (5 MiB), and no bigger. */
const fullPart = () => randomBytes(MIN_PART_SIZE);

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function expectError(response: Response, status: number, code: string) {
  expect(response.status).toBe(status);
  const body = (await response.json()) as {
    error: { code: string; message: string; details?: Record<string, unknown>; request_id: string };
  };
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toEqual(expect.any(String));
  return body.error;
}

/** What the store throws: a StoreError of `code`, with at least `details` and a `message` matching when given. */
const storeError = (code: StoreErrorCode, details?: Record<string, unknown>, message?: RegExp) =>
  expect.objectContaining({
    name: 'StoreError',
    code,
    ...(details ? { details: expect.objectContaining(details) } : {}),
    ...(message ? { message: expect.stringMatching(message) } : {}),
  });

/** Nothing of `key` is visible or half-written. */
async function expectNoTrace(key: string) {
  expect(await store.head(key)).toBeUndefined();
  expect(existsSync(join(dir, key))).toBe(false);
  expect(await tmpFiles()).toEqual([]);
}

async function eventually(check: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await sleep(10);
  }
}

function put(url: string, body: RequestInit['body'], contentType = 'application/octet-stream') {
  return fetch(url, { method: 'PUT', body, headers: { 'content-type': contentType } });
}

function chunked(chunks: Buffer[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(new Uint8Array(chunk));
      controller.close();
    },
  });
}

function putStream(url: string, chunks: Buffer[], contentType = 'application/octet-stream') {
  return fetch(url, {
    method: 'PUT',
    body: chunked(chunks),
    headers: { 'content-type': contentType },
    duplex: 'half',
  } as RequestInit);
}

/** A request with an exact, unnormalized path (fetch would resolve dot segments). */
function rawRequest(
  method: string,
  path: string,
  body?: Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { hostname, port, method, path, headers: { 'content-type': 'text/plain' } },
      (res) => {
        collect(res).then(
          (data) => resolve({ status: res.statusCode!, headers: res.headers, body: data }),
          reject,
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function upload(data: Buffer, contentType = 'application/pdf'): Promise<string> {
  const key = newKey();
  const url = await store.presignUpload(key, { size: data.length, contentType, expiresAt: inSeconds(60) });
  const response = await put(url, data, contentType);
  expect(response.status).toBe(200);
  return key;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-local-store-'));
  app = Fastify();
  installErrorHandling(app);
  // The routes only verify and store; the public URL (known once listening) only matters for presigning,
  // so a second store over the same folder and secret presigns with the real address.
  receiver = createLocalStore({ dir, publicUrl: 'http://unused', secret: SECRET });
  await app.register(objectRoutes(receiver));
  base = await app.listen({ host: '127.0.0.1', port: 0 });
  store = createLocalStore({ dir, publicUrl: base, secret: SECRET });
});

afterAll(async () => {
  await app.close();
  await rm(dir, { recursive: true, force: true });
});

describe('presigned PUT and GET', () => {
  it('round-trips the bytes with the documented headers', async () => {
    const data = randomBytes(2 * 1024 * 1024 + 17); // above Fastify's default 1 MiB body limit
    const key = newKey();
    const putUrl = await store.presignUpload(key, {
      size: data.length,
      contentType: 'application/pdf',
      expiresAt: inSeconds(60),
    });
    expect(putUrl.startsWith(`${base}/objects/${key}?`)).toBe(true);
    const stored = await put(putUrl, data, 'application/pdf');
    expect(stored.status).toBe(200);
    expect(stored.headers.get('etag')).toBe(`"${sha256(data)}"`);
    expect(await stored.text()).toBe('');

    expect(await store.head(key)).toEqual({
      size: data.length,
      etag: `"${sha256(data)}"`,
      sha256: sha256(data),
    });
    expect(await tmpFiles()).toEqual([]);

    const getUrl = await store.presignGet(key, {
      expiresAt: inSeconds(3600),
      filename: 'report.pdf',
      contentType: 'application/pdf',
    });
    const response = await fetch(getUrl);
    expect(response.status).toBe(200);
    expect(Buffer.from(await response.arrayBuffer()).equals(data)).toBe(true);
    const headers = response.headers;
    expect(headers.get('content-type')).toBe('application/pdf');
    expect(headers.get('content-length')).toBe(String(data.length));
    expect(headers.get('etag')).toBe(`"${sha256(data)}"`);
    expect(headers.get('accept-ranges')).toBe('bytes');
    expect(headers.get('content-disposition')).toBe('attachment; filename=report.pdf');
    expect(headers.get('x-content-type-options')).toBe('nosniff');
    expect(headers.get('content-security-policy')).toBe('sandbox');
    const maxAge = Number(/^private, max-age=(\d+)$/.exec(headers.get('cache-control') ?? '')?.[1]);
    expect(maxAge).toBeGreaterThanOrEqual(3590);
    expect(maxAge).toBeLessThanOrEqual(3600);

    const head = await fetch(getUrl, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(data.length));
    expect(head.headers.get('etag')).toBe(`"${sha256(data)}"`);
    expect((await head.arrayBuffer()).byteLength).toBe(0);

    expect((await collect(await store.read(key))).equals(data)).toBe(true);
  });

  it('refuses a second PUT through the same URL and keeps the first bytes', async () => {
    const data = Buffer.from('first version');
    const key = newKey();
    const url = await store.presignUpload(key, {
      size: data.length,
      contentType: 'text/plain',
      expiresAt: inSeconds(60),
    });
    expect((await put(url, data, 'text/plain')).status).toBe(200);
    await expectError(await put(url, Buffer.from('other version'), 'text/plain'), 409, 'CONFLICT');
    expect((await collect(await store.read(key))).toString()).toBe('first version');
    expect(await tmpFiles()).toEqual([]);
  });

  it('stores exactly one of concurrent PUTs through one URL, with the checksum of its bytes', async () => {
    const size = 256 * 1024;
    for (let round = 1; round <= 5; round++) {
      const key = newKey();
      const url = await store.presignUpload(key, {
        size,
        contentType: 'application/octet-stream',
        expiresAt: inSeconds(60),
      });
      const bodies = Array.from({ length: 4 }, () => randomBytes(size));
      const responses = await Promise.all(bodies.map((body) => put(url, body)));
      const statuses = responses.map((response) => response.status);
      expect(
        statuses.filter((status) => status === 200),
        `round ${round}: ${statuses}`,
      ).toHaveLength(1);
      const winner = bodies[statuses.indexOf(200)]!;
      for (const response of responses) {
        if (response.status === 200) expect(response.headers.get('etag')).toBe(`"${sha256(winner)}"`);
        else await expectError(response, 409, 'CONFLICT');
      }
      const stored = await collect(await store.read(key));
      expect(stored.equals(winner), `round ${round}: the bytes of the PUT answered 200`).toBe(true);
      expect(await store.head(key)).toEqual({ size, etag: `"${sha256(stored)}"`, sha256: sha256(stored) });
      expect(await tmpFiles()).toEqual([]);
    }
  });

  it('accepts an empty object and a chunked body of the exact size', async () => {
    const empty = await upload(Buffer.alloc(0), 'text/plain');
    expect(await store.head(empty)).toEqual({
      size: 0,
      etag: `"${sha256(Buffer.alloc(0))}"`,
      sha256: sha256(Buffer.alloc(0)),
    });

    const chunks = [randomBytes(1000), randomBytes(70_000), randomBytes(5)];
    const data = Buffer.concat(chunks);
    const key = newKey();
    const url = await store.presignUpload(key, {
      size: data.length,
      contentType: 'image/png',
      expiresAt: inSeconds(60),
    });
    const response = await putStream(url, chunks, 'image/png');
    expect(response.status).toBe(200);
    expect((await store.head(key))?.sha256).toBe(sha256(data));
  });

  it('serves Content-Disposition per RFC 6266 for a name with spaces, quotes and non-ASCII', async () => {
    const key = await upload(Buffer.from('%PDF-1.7'));
    const filename = 'résumé "final".pdf';
    const url = await store.presignGet(key, {
      expiresAt: inSeconds(60),
      filename,
      contentType: 'application/pdf',
    });
    const response = await fetch(url);
    expect(response.status).toBe(200);
    const header = response.headers.get('content-disposition')!;
    expect(header).toBe(
      `attachment; filename="r?sum? \\"final\\".pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.pdf`,
    );
    expect(parseDisposition(header)).toEqual({ type: 'attachment', parameters: { filename } });
  });

  it('answers 404 NOT_FOUND for a validly signed URL of a missing object', async () => {
    const url = await store.presignGet(newKey(), {
      expiresAt: inSeconds(60),
      filename: 'x',
      contentType: 'text/plain',
    });
    await expectError(await fetch(url), 404, 'NOT_FOUND');
  });
});

describe('rejected uploads leave nothing behind', () => {
  const size = 10;
  const presign = (key: string, contentType = 'text/plain', expiresAt = inSeconds(60)) =>
    store.presignUpload(key, { size, contentType, expiresAt });

  it('rejects a Content-Length longer or shorter than signed with 400 BAD_REQUEST', async () => {
    for (const length of [size + 5, size - 5]) {
      const key = newKey();
      await expectError(
        await put(await presign(key), Buffer.alloc(length, 1), 'text/plain'),
        400,
        'BAD_REQUEST',
      );
      await expectNoTrace(key);
    }
  });

  it('rejects a chunked body that turns out too long or too short with 400 BAD_REQUEST', async () => {
    for (const chunks of [
      [Buffer.alloc(6), Buffer.alloc(6)],
      [Buffer.alloc(4), Buffer.alloc(5)],
    ]) {
      const key = newKey();
      const error = await expectError(
        await putStream(await presign(key), chunks, 'text/plain'),
        400,
        'BAD_REQUEST',
      );
      expect(error.message).toMatch(/declared/);
      await expectNoTrace(key);
    }
  });

  it('answers a too long chunked body as soon as it is too long, without reading the rest', async () => {
    const key = newKey();
    const url = new URL(await presign(key));
    const req = httpRequest(url, { method: 'PUT', headers: { 'content-type': 'text/plain' } });
    req.on('error', () => {});
    req.write(Buffer.alloc(size + 1)); // chunked, and never ended
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(400);
    expect(res.headers.connection).toBe('close');
    expect(JSON.parse((await collect(res)).toString()).error.code).toBe('BAD_REQUEST');
    req.destroy();
    await expectNoTrace(key);
  });

  it('rejects a Content-Type other than the signed one with 403 FORBIDDEN', async () => {
    const key = newKey();
    for (const contentType of ['text/html', 'text/plainx', 'application/octet-stream']) {
      await expectError(await put(await presign(key), Buffer.alloc(size), contentType), 403, 'FORBIDDEN');
    }
    const noType = await fetch(await presign(key), { method: 'PUT', body: new Uint8Array(size) });
    await expectError(noType, 403, 'FORBIDDEN');
    await expectNoTrace(key);
  });

  it('accepts the signed Content-Type in other case, or with parameters a browser adds', async () => {
    for (const contentType of ['Text/Plain', 'text/plain;charset=UTF-8']) {
      const key = newKey();
      expect((await put(await presign(key), Buffer.alloc(size), contentType)).status).toBe(200);
      expect((await store.head(key))?.size).toBe(size);
    }
  });

  it('rejects a tampered signature, size or key with 403 FORBIDDEN', async () => {
    const key = newKey();
    const url = new URL(await presign(key));
    const sig = url.searchParams.get('sig')!;
    const badSig = new URL(url);
    badSig.searchParams.set('sig', `${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`);
    const badSize = new URL(url);
    badSize.searchParams.set('size', String(size + 1));
    const otherKey = newKey();
    const badKey = new URL(url.href.replace(key, otherKey));
    const noSig = new URL(url);
    noSig.searchParams.delete('sig');
    for (const [target, length] of [
      [badSig, size],
      [badSize, size + 1],
      [badKey, size],
      [noSig, size],
    ] as const) {
      const error = await expectError(
        await put(target.href, Buffer.alloc(length), 'text/plain'),
        403,
        'FORBIDDEN',
      );
      expect(error.message).toMatch(/signature/);
    }
    await expectNoTrace(key);
    await expectNoTrace(otherKey);
  });

  it('rejects an expired URL with 403 FORBIDDEN saying it expired', async () => {
    const key = newKey();
    const url = await presign(key, 'text/plain', inSeconds(-5));
    const error = await expectError(await put(url, Buffer.alloc(size), 'text/plain'), 403, 'FORBIDDEN');
    expect(error.message).toMatch(/expired/);
    await expectNoTrace(key);

    const existing = await upload(Buffer.from('hello'), 'text/plain');
    const getUrl = await store.presignGet(existing, {
      expiresAt: inSeconds(-1),
      filename: 'a',
      contentType: 'text/plain',
    });
    expect((await expectError(await fetch(getUrl), 403, 'FORBIDDEN')).message).toMatch(/expired/);
  });

  it('refuses a GET URL used for PUT and a PUT URL used for GET', async () => {
    const key = newKey();
    const getUrl = await store.presignGet(key, {
      expiresAt: inSeconds(60),
      filename: 'a.txt',
      contentType: 'text/plain',
    });
    await expectError(await put(getUrl, Buffer.alloc(size), 'text/plain'), 403, 'FORBIDDEN');
    await expectNoTrace(key);

    const data = Buffer.from('0123456789');
    const existing = newKey();
    const putUrl = await store.presignUpload(existing, {
      size,
      contentType: 'text/plain',
      expiresAt: inSeconds(60),
    });
    expect((await put(putUrl, data, 'text/plain')).status).toBe(200);
    await expectError(await fetch(putUrl), 403, 'FORBIDDEN');
    const withName = new URL(putUrl);
    withName.searchParams.set('name', 'a.txt');
    await expectError(await fetch(withName), 403, 'FORBIDDEN');
  });

  it('leaves nothing when the client aborts mid-upload', async () => {
    const key = newKey();
    const total = 4 * 1024 * 1024;
    const url = new URL(
      await store.presignUpload(key, { size: total, contentType: 'video/mp4', expiresAt: inSeconds(60) }),
    );
    const req = httpRequest(url, {
      method: 'PUT',
      headers: { 'content-type': 'video/mp4', 'content-length': String(total) },
    });
    req.on('error', () => {});
    req.write(randomBytes(512 * 1024));
    await eventually(async () => (await tmpFiles()).length > 0);
    req.destroy();
    await eventually(async () => (await tmpFiles()).length === 0);
    await expectNoTrace(key);
  });
});

describe('ranges', () => {
  const data = randomBytes(1000);
  let url: string;

  beforeAll(async () => {
    const key = await upload(data, 'application/octet-stream');
    url = await store.presignGet(key, {
      expiresAt: inSeconds(60),
      filename: 'data.bin',
      contentType: 'application/octet-stream',
    });
  });

  it.each([
    ['bytes=10-19', 10, 19],
    ['bytes=990-', 990, 999],
    ['bytes=-5', 995, 999],
    ['bytes=-5000', 0, 999],
    ['bytes=10-5000', 10, 999],
  ])('answers %s with 206 and the exact bytes', async (range, start, end) => {
    const response = await fetch(url, { headers: { range } });
    expect(response.status).toBe(206);
    expect(response.headers.get('content-range')).toBe(`bytes ${start}-${end}/1000`);
    expect(response.headers.get('content-length')).toBe(String(end - start + 1));
    expect(Buffer.from(await response.arrayBuffer()).equals(data.subarray(start, end + 1))).toBe(true);
  });

  it.each(['bytes=1000-', 'bytes=5000-6000', 'bytes=-0'])('answers %s with 416', async (range) => {
    const response = await fetch(url, { headers: { range } });
    expect(response.headers.get('content-range')).toBe('bytes */1000');
    await expectError(response, 416, 'RANGE_NOT_SATISFIABLE');
  });

  it.each(['bytes=0-1,5-6', 'bytes=5-2', 'items=0-1'])('serves %s as the whole object', async (range) => {
    const response = await fetch(url, { headers: { range } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-range')).toBeNull();
    expect(Buffer.from(await response.arrayBuffer()).equals(data)).toBe(true);
  });

  it('lives on when a client goes away in the middle of a large download', async () => {
    const big = randomBytes(8 * 1024 * 1024);
    const key = await upload(big, 'application/octet-stream');
    const bigUrl = await store.presignGet(key, {
      expiresAt: inSeconds(60),
      filename: 'big.bin',
      contentType: 'application/octet-stream',
    });
    const abort = new AbortController();
    const response = await fetch(bigUrl, { signal: abort.signal });
    const reader = response.body!.getReader();
    await reader.read();
    abort.abort();
    await reader.read().catch(() => undefined);
    // Writes still in flight when the socket went failed; none may go unhandled (which ends a process).
    await sleep(200);
    expect(Buffer.from(await (await fetch(bigUrl)).arrayBuffer()).equals(big)).toBe(true);
  });

  it('reads a range through the store', async () => {
    const key = await upload(data);
    expect((await collect(await store.read(key, { start: 5, end: 9 }))).equals(data.subarray(5, 10))).toBe(
      true,
    );
    expect((await collect(await store.read(key, { start: 998, end: 5000 }))).equals(data.subarray(998))).toBe(
      true,
    );
    await expect(store.read(newKey())).rejects.toMatchObject(storeError('NoSuchKey'));
  });
});

describe('keys', () => {
  const badKeys = [
    '../etc/passwd',
    'a/../b',
    'a/./b',
    'a//b',
    '/a',
    'a/',
    'a/b.txt',
    '',
    'a b',
    'a\\b',
    '..',
  ];

  it.each(badKeys)('presign and head refuse %j', async (key) => {
    const expiresAt = inSeconds(60);
    const refused = storeError('InvalidArgument');
    await expect(
      store.presignUpload(key, { size: 1, contentType: 'text/plain', expiresAt }),
    ).rejects.toMatchObject(refused);
    await expect(
      store.presignGet(key, { expiresAt, filename: 'x', contentType: 'text/plain' }),
    ).rejects.toMatchObject(refused);
    await expect(store.head(key)).rejects.toMatchObject(refused);
    await expect(store.read(key)).rejects.toMatchObject(refused);
    await expect(
      store.createMultipart(key, { contentType: 'text/plain', totalSize: MULTIPART_TOTAL }),
    ).rejects.toMatchObject(refused);
  });

  it('the routes refuse traversal paths with 400 BAD_REQUEST', async () => {
    const signed = new URL(
      await store.presignUpload(newKey(), { size: 3, contentType: 'text/plain', expiresAt: inSeconds(60) }),
    );
    for (const path of [
      'proj/../../escape',
      'proj/%2e%2e/%2e%2e/escape',
      '..%2f..%2fescape',
      'proj//escape',
      'a.b',
    ]) {
      const put = await rawRequest('PUT', `/objects/${path}${signed.search}`, Buffer.from('abc'));
      expect(put.status).toBe(400);
      expect(JSON.parse(put.body.toString()).error.code).toBe('BAD_REQUEST');
      const get = await rawRequest('GET', `/objects/${path}${signed.search}`);
      expect(get.status).toBe(400);
    }
    expect(existsSync(join(dir, '..', 'escape'))).toBe(false);
    expect(await tmpFiles()).toEqual([]);
  });

  it('delete removes the object and its sidecar, and ignores missing objects', async () => {
    const key = await upload(Buffer.from('bye'), 'text/plain');
    await store.delete(key);
    expect(await store.head(key)).toBeUndefined();
    expect(existsSync(join(dir, key))).toBe(false);
    expect(existsSync(join(dir, key.split('/')[0]!, key.split('/')[1]!))).toBe(false);
    await store.delete(key);
    const url = await store.presignGet(key, {
      expiresAt: inSeconds(60),
      filename: 'a',
      contentType: 'text/plain',
    });
    await expectError(await fetch(url), 404, 'NOT_FOUND');
  });
});

describe('multipart uploads', () => {
  const partUrl = (key: string, uploadId: string, partNumber: number) =>
    store.presignPart(key, uploadId, partNumber, { expiresAt: inSeconds(60) });

  it('assembles parts uploaded out of order, with re-uploads replacing a part', async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, {
      contentType: 'application/zip',
      totalSize: MULTIPART_TOTAL,
    });
    // Every part but the last holds at least 5 MiB, as complete requires.
    const parts = [fullPart(), fullPart(), randomBytes(10 * 1024)];
    const replaced = fullPart();

    for (const index of [2, 0, 1]) {
      const response = await put(await partUrl(key, uploadId, index + 1), parts[index]!, 'whatever/type');
      expect(response.status).toBe(200);
      expect(response.headers.get('etag')).toBe(`"${md5(parts[index]!)}"`);
    }
    const oldEtag = `"${md5(parts[1]!)}"`;
    const again = await putStream(await partUrl(key, uploadId, 2), [
      replaced.subarray(0, 1000),
      replaced.subarray(1000),
    ]);
    expect(again.status).toBe(200);
    expect(again.headers.get('etag')).toBe(`"${md5(replaced)}"`);
    parts[1] = replaced;
    expect(await readdir(join(dir, '.multipart', uploadId, '2'))).toEqual([md5(replaced)]);

    const listed = await store.listParts(key, uploadId);
    expect(listed).toEqual(
      parts.map((part, index) => ({ partNumber: index + 1, etag: `"${md5(part)}"`, size: part.length })),
    );

    const etags = listed.map(({ partNumber, etag }) => ({ partNumber, etag }));
    await expect(
      store.completeMultipart(key, uploadId, [etags[0]!, { partNumber: 2, etag: oldEtag }, etags[2]!]),
    ).rejects.toMatchObject(storeError('InvalidPart', { part_number: 2 }, /^Part 2 does not match/));
    // The missing part comes last: the parts before it are big enough, so it is refused for being missing.
    await expect(
      store.completeMultipart(key, uploadId, [etags[0]!, etags[1]!, { partNumber: 4, etag: oldEtag }]),
    ).rejects.toMatchObject(storeError('InvalidPart', { part_number: 4 }, /^Part 4 was not uploaded/));
    await expect(
      store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: '"../../../../x"' }]),
    ).rejects.toMatchObject(storeError('InvalidPart', { part_number: 1 }, /^Part 1 does not match/));
    expect(await store.head(key)).toBeUndefined();

    const whole = Buffer.concat(parts);
    const expectedEtag = `"${md5(Buffer.concat(parts.map((part) => Buffer.from(md5(part), 'hex'))))}-3"`;
    const info = await store.completeMultipart(key, uploadId, etags);
    expect(info).toEqual({ size: whole.length, etag: expectedEtag, sha256: sha256(whole) });
    expect(await store.head(key)).toEqual(info);
    expect(sha256(await collect(await store.read(key)))).toBe(sha256(whole));
    expect(existsSync(join(dir, '.multipart', uploadId))).toBe(false);
    expect(await tmpFiles()).toEqual([]);

    const getUrl = await store.presignGet(key, {
      expiresAt: inSeconds(60),
      filename: 'a.zip',
      contentType: 'application/zip',
    });
    const download = await fetch(getUrl);
    expect(download.headers.get('etag')).toBe(expectedEtag);
    expect(sha256(Buffer.from(await download.arrayBuffer()))).toBe(sha256(whole));

    // The finished session's URLs are refused.
    await expectError(await put(await partUrl(key, uploadId, 4), Buffer.from('late')), 404, 'NOT_FOUND');
    await expect(store.listParts(key, uploadId)).rejects.toMatchObject(storeError('NoSuchUpload'));
    expect(existsSync(join(dir, '.multipart', uploadId))).toBe(false);

    // Reads span the assembled object's parts; delete removes them all.
    const middle = { start: parts[0]!.length - 3, end: parts[0]!.length + parts[1]!.length + 2 };
    expect(
      (await collect(await store.read(key, middle))).equals(whole.subarray(middle.start, middle.end + 1)),
    ).toBe(true);
    await store.delete(key);
    expect(await store.head(key)).toBeUndefined();
    expect(existsSync(`${join(dir, ...key.split('/'))}.parts`)).toBe(false);
  });

  it("refuses S3's part rules broken at complete, assembling nothing, and completes afterwards", async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, {
      contentType: 'application/octet-stream',
      totalSize: MULTIPART_TOTAL,
    });
    // One byte short of 5 MiB, exactly 5 MiB, and a small last part.
    const parts = [randomBytes(MIN_PART_SIZE - 1), fullPart(), randomBytes(1000)];
    for (const [index, part] of parts.entries()) {
      expect((await put(await partUrl(key, uploadId, index + 1), part)).status).toBe(200);
    }
    const [one, two, three] = parts.map((part, index) => ({ partNumber: index + 1, etag: `"${md5(part)}"` }));
    const assembled = `${join(dir, ...key.split('/'))}.parts`;

    await expect(store.completeMultipart(key, uploadId, [one!, two!, three!])).rejects.toMatchObject(
      storeError('InvalidPart', { part_number: 1 }, /^Part 1 is smaller than 5 MiB/),
    );
    for (const [list, partNumber] of [
      [[two!, one!], 1],
      [[two!, two!, three!], 2],
    ] as const) {
      await expect(store.completeMultipart(key, uploadId, [...list])).rejects.toMatchObject(
        storeError('InvalidPart', { part_number: partNumber }, /ascending/),
      );
    }
    expect(await store.head(key)).toBeUndefined();
    expect(existsSync(assembled)).toBe(false);
    expect(await store.listParts(key, uploadId)).toEqual(
      parts.map((part, index) => ({ partNumber: index + 1, etag: `"${md5(part)}"`, size: part.length })),
    );

    // Parts 2 and 3 follow the rules (a small part may come last, and part numbers may leave gaps).
    const info = await store.completeMultipart(key, uploadId, [two!, three!]);
    const whole = Buffer.concat([parts[1]!, parts[2]!]);
    const etag = `"${md5(Buffer.concat([parts[1]!, parts[2]!].map((part) => Buffer.from(md5(part), 'hex'))))}-2"`;
    expect(info).toEqual({ size: whole.length, etag, sha256: sha256(whole) });
    expect(await store.head(key)).toEqual(info);
    expect((await collect(await store.read(key))).equals(whole)).toBe(true);
    expect(existsSync(join(dir, '.multipart', uploadId))).toBe(false);
    expect(await tmpFiles()).toEqual([]);
  });

  it('drops a part staged and discarded while its body is still arriving, and reads the rest of it', async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, {
      contentType: 'text/plain',
      totalSize: MULTIPART_TOTAL,
    });
    const body = new PassThrough();
    const staged = store.stagePart(key, uploadId, body, MIN_PART_SIZE, { md5: false });
    body.write(randomBytes(1024 * 1024));
    await vi.waitFor(async () => expect(await tmpFiles()).not.toEqual([]));
    // The client holds the rest back: the discard does not wait for it.
    await staged.discard();
    body.end(randomBytes(MIN_PART_SIZE - 1024 * 1024));
    // Read to its end and dropped, so that the client's request ends and it gets its answer.
    await once(body, 'end');
    await vi.waitFor(async () => expect(await tmpFiles()).toEqual([]));
    await expect(staged.place(2)).rejects.toMatchObject(storeError('InvalidArgument'));
    expect(await store.listParts(key, uploadId)).toEqual([]);
  });

  it('abort removes the parts; later part PUTs get 404 and aborting again is fine', async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, {
      contentType: 'text/plain',
      totalSize: MULTIPART_TOTAL,
    });
    expect((await put(await partUrl(key, uploadId, 1), Buffer.from('part one'))).status).toBe(200);
    await store.abortMultipart(key, uploadId);
    expect(existsSync(join(dir, '.multipart', uploadId))).toBe(false);
    await expectError(await put(await partUrl(key, uploadId, 2), Buffer.from('part two')), 404, 'NOT_FOUND');
    expect(existsSync(join(dir, '.multipart', uploadId))).toBe(false);
    await store.abortMultipart(key, uploadId);
    await store.abortMultipart(key, 'unknownuploadid123456');
    await expect(
      store.completeMultipart(key, uploadId, [{ partNumber: 1, etag: '"x"' }]),
    ).rejects.toMatchObject(storeError('NoSuchUpload'));
    await expectNoTrace(key);
  });

  it('refuses part URLs that are tampered with or aimed at another key', async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, {
      contentType: 'text/plain',
      totalSize: MULTIPART_TOTAL,
    });
    const url = new URL(await partUrl(key, uploadId, 1));
    const otherPart = new URL(url);
    otherPart.searchParams.set('part', '2');
    await expectError(await put(otherPart.href, Buffer.from('x')), 403, 'FORBIDDEN');
    const otherKey = newKey();
    const foreign = await partUrl(otherKey, uploadId, 1);
    await expectError(await put(foreign, Buffer.from('x')), 404, 'NOT_FOUND');
    expect(await store.listParts(key, uploadId)).toEqual([]);
    for (const partNumber of [0, 10_001]) {
      await expect(partUrl(key, uploadId, partNumber)).rejects.toMatchObject(
        storeError('InvalidArgument', { field: 'part', part_number: partNumber }),
      );
    }
    await store.abortMultipart(key, uploadId);
  });
});

describe('part URLs signed for a size', () => {
  const size = 1000;
  const sizedUrl = (key: string, uploadId: string, partNumber = 1, partSize = size) =>
    store.presignPart(key, uploadId, partNumber, { expiresAt: inSeconds(60), size: partSize });

  async function start(totalSize = MULTIPART_TOTAL): Promise<{ key: string; uploadId: string }> {
    const key = newKey();
    const uploadId = await store.createMultipart(key, { contentType: 'application/octet-stream', totalSize });
    return { key, uploadId };
  }

  /** Nothing of the upload's part 1 is stored, even half-written. */
  async function expectNoPart(key: string, uploadId: string) {
    expect(await store.listParts(key, uploadId)).toEqual([]);
    expect(existsSync(join(dir, '.multipart', uploadId, '1'))).toBe(false);
    expect(await tmpFiles()).toEqual([]);
  }

  it('accepts exactly the signed size, sent whole or chunked', async () => {
    const { key, uploadId } = await start();
    // Part 1 comes before another at complete, so it holds 5 MiB; the last part the size of the others here.
    const parts = [fullPart(), randomBytes(size)];
    const url = await sizedUrl(key, uploadId, 1, MIN_PART_SIZE);
    expect(new URL(url).searchParams.get('size')).toBe(String(MIN_PART_SIZE));
    const whole = await put(url, parts[0]!);
    expect(whole.status).toBe(200);
    expect(whole.headers.get('etag')).toBe(`"${md5(parts[0]!)}"`);
    const last = await sizedUrl(key, uploadId, 2);
    expect(new URL(last).searchParams.get('size')).toBe(String(size));
    const chunks = [parts[1]!.subarray(0, 300), parts[1]!.subarray(300)];
    expect((await putStream(last, chunks)).status).toBe(200);
    const listed = await store.listParts(key, uploadId);
    expect(listed).toEqual(
      parts.map((part, i) => ({ partNumber: i + 1, etag: `"${md5(part)}"`, size: part.length })),
    );
    const info = await store.completeMultipart(key, uploadId, listed);
    expect(info.sha256).toBe(sha256(Buffer.concat(parts)));
  });

  it('refuses a body of any other size with 400 BAD_REQUEST and stores nothing', async () => {
    const { key, uploadId } = await start();
    const url = await sizedUrl(key, uploadId);
    for (const length of [size + 1, size - 1, 0]) {
      const error = await expectError(await put(url, Buffer.alloc(length, 1)), 400, 'BAD_REQUEST');
      expect(error.message).toMatch(/Content-Length/);
    }
    for (const chunks of [
      [Buffer.alloc(600), Buffer.alloc(600)],
      [Buffer.alloc(400), Buffer.alloc(500)],
    ]) {
      const error = await expectError(await putStream(url, chunks), 400, 'BAD_REQUEST');
      expect(error.message).toMatch(/declared/);
    }
    await expectNoPart(key, uploadId);
    // The store itself holds the size, whatever the HTTP layer let through.
    const signed = store.verifyUrl('PUT', key, Object.fromEntries(new URL(url).searchParams));
    if (signed.kind !== 'part') throw new Error('a part URL was expected');
    const short = (async function* () {
      yield Buffer.alloc(size - 1);
    })();
    await expect(store.receive(signed, short)).rejects.toMatchObject(storeError('InvalidArgument'));
    await expectNoPart(key, uploadId);
  });

  it('refuses a size tampered with, removed or added with 403 FORBIDDEN', async () => {
    const { key, uploadId } = await start();
    const sized = new URL(await sizedUrl(key, uploadId));
    const bigger = new URL(sized);
    bigger.searchParams.set('size', String(size + 1));
    const removed = new URL(sized);
    removed.searchParams.delete('size');
    const added = new URL(await store.presignPart(key, uploadId, 1, { expiresAt: inSeconds(60) }));
    added.searchParams.set('size', String(size));
    for (const [target, length] of [
      [bigger, size + 1],
      [removed, size + 1],
      [added, size],
    ] as const) {
      const error = await expectError(await put(target.href, Buffer.alloc(length)), 403, 'FORBIDDEN');
      expect(error.message).toMatch(/signature/);
    }
    await expectNoPart(key, uploadId);
  });

  it('is refused at presign for a size no part of the upload can have', async () => {
    const { key, uploadId } = await start(5000);
    for (const bad of [-1, 1.5, MAX_PART_SIZE + 1]) {
      await expect(sizedUrl(key, uploadId, 1, bad)).rejects.toMatchObject(
        storeError('InvalidArgument', { field: 'size' }),
      );
    }
    await expect(sizedUrl(key, uploadId, 1, 5001)).rejects.toMatchObject(
      storeError('InvalidArgument', { field: 'size', total_size: 5000 }),
    );
    expect(new URL(await sizedUrl(key, uploadId, 1, 5000)).searchParams.get('size')).toBe('5000');
    await expect(sizedUrl(newKey(), uploadId)).rejects.toMatchObject(storeError('NoSuchUpload'));
  });
});

describe('the rest of the ObjectStore interface', () => {
  it('declares what it can do, and seals an uploaded object as it stands', async () => {
    expect(store.capabilities).toEqual({ servesUrls: true, sha256OnUpload: true, partSizeRequired: false });
    const key = await upload(Buffer.from('sealed'), 'text/plain');
    expect(await store.seal(key)).toEqual(await store.head(key));
    expect(await store.seal(key)).toEqual(await store.head(key));
    expect(await store.seal(newKey())).toBeUndefined();
  });

  it('is ready once its folder exists, and Unavailable when it cannot write there', async () => {
    const root = await mkdtemp(join(tmpdir(), 'coffer-local-check-'));
    try {
      const fresh = createLocalStore({ dir: join(root, 'a', 'b'), publicUrl: base, secret: SECRET });
      await fresh.check();
      expect(existsSync(join(root, 'a', 'b'))).toBe(true);
      await fresh.close();
      await writeFile(join(root, 'file'), 'not a folder');
      const blocked = createLocalStore({ dir: join(root, 'file'), publicUrl: base, secret: SECRET });
      await expect(blocked.check()).rejects.toMatchObject(storeError('Unavailable'));
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("is answered at the HTTP edge with the contract's errors, hiding why the store is unavailable", () => {
    const tooLarge = httpAnswer(new StoreError('TooLarge', 'Too many bytes', { max_bytes: 10 }));
    expect(tooLarge).toMatchObject({
      status: 413,
      code: 'REQUEST_TOO_LARGE',
      message: 'Too many bytes',
      details: { max_bytes: 10 },
    });
    expect(httpAnswer(new StoreError('NoSuchUpload', 'Upload not found'))).toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
    });
    expect(httpAnswer(new StoreError('InvalidPart', 'Part 2 was not uploaded'))).toMatchObject({
      status: 422,
      code: 'VALIDATION_ERROR',
    });
    const cause = new Error('connect ECONNREFUSED 10.0.0.7:9000');
    const unavailable = httpAnswer(
      new StoreError('Unavailable', 'read: 10.0.0.7 failed', { host: 'x' }, { cause }),
    );
    expect(unavailable).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE', details: undefined });
    expect(unavailable.message).not.toMatch(/10\.0\.0\.7/);
  });
});

describe('the SHA-256 of a multipart upload, computed while its parts arrive', () => {
  /** `count` parts to complete in order: 5 MiB each (complete's least for a part not last), the last smaller. */
  const parts = (count: number) =>
    Array.from({ length: count }, (_, index) =>
      index < count - 1 ? fullPart() : randomBytes(64 * 1024 + 7),
    );
  const etagOf = (part: Buffer) => `"${md5(part)}"`;

  async function start(bytes: Buffer[]): Promise<{ key: string; uploadId: string }> {
    const key = newKey();
    const uploadId = await store.createMultipart(key, {
      contentType: 'application/octet-stream',
      totalSize: MULTIPART_TOTAL,
    });
    for (const [index, part] of bytes.entries()) await putPart(key, uploadId, index + 1, part);
    return { key, uploadId };
  }

  async function putPart(key: string, uploadId: string, partNumber: number, part: Buffer) {
    const response = await put(
      await store.presignPart(key, uploadId, partNumber, { expiresAt: inSeconds(60) }),
      part,
    );
    expect(response.status).toBe(200);
    // Let the background digest catch up, so that complete meets what it hashed.
    await sleep(20);
  }

  const listOf = (numbered: [number, Buffer][]) =>
    numbered.map(([partNumber, part]) => ({ partNumber, etag: etagOf(part) }));

  it('is the SHA-256 of the parts completed, when complete runs where they arrived', async () => {
    const bytes = parts(4);
    const { key, uploadId } = await start(bytes);
    const info = await receiver.completeMultipart(
      key,
      uploadId,
      listOf(bytes.map((part, i) => [i + 1, part])),
    );
    expect(info.sha256).toBe(sha256(Buffer.concat(bytes)));
    expect(sha256(await collect(await store.read(key)))).toBe(info.sha256);
  });

  it('follows a part re-uploaded with other bytes after it was hashed', async () => {
    const bytes = parts(3);
    const { key, uploadId } = await start(bytes);
    bytes[1] = fullPart();
    await putPart(key, uploadId, 2, bytes[1]);
    const info = await receiver.completeMultipart(
      key,
      uploadId,
      listOf(bytes.map((part, i) => [i + 1, part])),
    );
    expect(info.sha256).toBe(sha256(Buffer.concat(bytes)));
  });

  it('covers only the parts completed: a part left out, or fewer parts than arrived', async () => {
    // Parts 1 and 2 come before another at complete; parts 3 and 4 never do.
    const bytes = [fullPart(), fullPart(), randomBytes(64 * 1024 + 7), randomBytes(70 * 1024)];
    const gap = await start(bytes);
    const withGap: [number, Buffer][] = [
      [1, bytes[0]!],
      [2, bytes[1]!],
      [4, bytes[3]!],
    ];
    const info = await receiver.completeMultipart(gap.key, gap.uploadId, listOf(withGap));
    expect(info.sha256).toBe(sha256(Buffer.concat([bytes[0]!, bytes[1]!, bytes[3]!])));
    expect(info.size).toBe(bytes[0]!.length + bytes[1]!.length + bytes[3]!.length);

    const fewer = await start(bytes);
    const firstTwo = await receiver.completeMultipart(
      fewer.key,
      fewer.uploadId,
      listOf([
        [1, bytes[0]!],
        [2, bytes[1]!],
      ]),
    );
    expect(firstTwo.sha256).toBe(sha256(Buffer.concat([bytes[0]!, bytes[1]!])));
  });

  it('is the same when another store over the same folder completes the upload', async () => {
    const bytes = parts(3);
    const { key, uploadId } = await start(bytes);
    const info = await store.completeMultipart(key, uploadId, listOf(bytes.map((part, i) => [i + 1, part])));
    expect(info.sha256).toBe(sha256(Buffer.concat(bytes)));
  });

  it('puts the parts back when complete fails half-way, so that it can run again', async () => {
    const bytes = parts(3);
    const { key, uploadId } = await start(bytes);
    const list = listOf(bytes.map((part, i) => [i + 1, part]));
    // A folder where the second segment goes makes the second rename fail.
    const obstacle = join(`${join(dir, ...key.split('/'))}.parts`, '1', 'x');
    await mkdir(obstacle, { recursive: true });
    await expect(receiver.completeMultipart(key, uploadId, list)).rejects.toThrow();
    expect(await store.head(key)).toBeUndefined();
    expect(await store.listParts(key, uploadId)).toEqual(
      bytes.map((part, i) => ({ partNumber: i + 1, etag: etagOf(part), size: part.length })),
    );
    const info = await receiver.completeMultipart(key, uploadId, list);
    expect(info.sha256).toBe(sha256(Buffer.concat(bytes)));
    expect(sha256(await collect(await store.read(key)))).toBe(info.sha256);
  });

  it('is not fooled by a part replaced after it was hashed by other bytes of the same MD5', async () => {
    // Two different 128-byte blocks with the same MD5 (Wang et al., 2004).
    const [first, second] = [
      'd131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f8955ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5bd8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70',
      'd131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f8955ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5bd8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70',
    ].map((hex) => Buffer.from(hex, 'hex')) as [Buffer, Buffer];
    expect(md5(first)).toBe(md5(second));
    const { key, uploadId } = await start([first]);
    await putPart(key, uploadId, 1, second);
    const info = await receiver.completeMultipart(key, uploadId, listOf([[1, second]]));
    expect(info.sha256).toBe(sha256(second));
    expect(sha256(await collect(await store.read(key)))).toBe(sha256(second));
  });

  it('puts the parts back when it fails after moving them, so that it can run again', async () => {
    const bytes = parts(2);
    const { key, uploadId } = await start(bytes);
    const list = listOf(bytes.map((part, i) => [i + 1, part]));
    const digest = writers.digest;
    const spy = vi.spyOn(writers, 'digest').mockImplementation((algorithm) => {
      const real = digest(algorithm);
      return { ...real, finish: () => real.abort().then(() => Promise.reject(new Error('disk failure'))) };
    });
    try {
      // Completed on the other store: no running digest, so the failing one is used.
      await expect(store.completeMultipart(key, uploadId, list)).rejects.toThrow('disk failure');
    } finally {
      spy.mockRestore();
    }
    expect(await store.head(key)).toBeUndefined();
    expect(await store.listParts(key, uploadId)).toHaveLength(2);
    const info = await store.completeMultipart(key, uploadId, list);
    expect(info.sha256).toBe(sha256(Buffer.concat(bytes)));
  });

  it('keeps the stored-bytes bound across stores sharing the folder', async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, {
      contentType: 'application/octet-stream',
      totalSize: 1000,
    });
    await putPart(key, uploadId, 1, randomBytes(1000)); // placed by the store behind the routes
    // Placed by the other store, as another server on the same folder would.
    const url = store.verifyUrl(
      'PUT',
      key,
      Object.fromEntries(
        new URL(await store.presignPart(key, uploadId, 2, { expiresAt: inSeconds(60) })).searchParams,
      ),
    );
    if (url.kind !== 'part') throw new Error('a part URL was expected');
    await store.receive(
      url,
      (async function* () {
        yield randomBytes(1000);
      })(),
    );
    const over = await put(
      await store.presignPart(key, uploadId, 3, { expiresAt: inSeconds(60) }),
      randomBytes(1),
    );
    const error = await expectError(over, 413, 'REQUEST_TOO_LARGE');
    expect(error.details).toEqual({ max_bytes: 2000, stored_bytes: 2000 });
    expect(await store.listParts(key, uploadId)).toHaveLength(2);
  });

  it('survives a refused complete, and goes with an abort', async () => {
    const bytes = parts(3);
    const { key, uploadId } = await start(bytes);
    const list = listOf(bytes.map((part, i) => [i + 1, part]));
    await expect(
      receiver.completeMultipart(key, uploadId, [
        list[0]!,
        { partNumber: 2, etag: etagOf(bytes[0]!) },
        list[2]!,
      ]),
    ).rejects.toMatchObject(storeError('InvalidPart', { part_number: 2 }, /^Part 2 does not match/));
    const info = await receiver.completeMultipart(key, uploadId, list);
    expect(info.sha256).toBe(sha256(Buffer.concat(bytes)));

    const aborted = await start([randomBytes(1000), randomBytes(1000)]); // never completed: any size
    await receiver.abortMultipart(aborted.key, aborted.uploadId);
    await expectNoTrace(aborted.key);
    expect(existsSync(join(dir, '.multipart', aborted.uploadId))).toBe(false);
  });
});
