import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StorageConfig } from '../../src/config.ts';
import { installErrorHandling } from '../../src/http/error-handler.ts';
import { objectRoutes } from '../../src/http/object-routes.ts';
import { createObjectStore } from '../../src/infra/storage/index.ts';
import { isLocalStore } from '../../src/infra/storage/local/store.ts';
import { type ObjectStore, StoreError } from '../../src/infra/storage/object-store.ts';
import { s3TestSettings } from '../support/backends.ts';
import { freePort } from '../support/net.ts';

/**
 * One contract every object store keeps, run on each backend: the local store behind Coffer's own
 * object routes, and S3 (a real SigV4-checking server) where COFFER_TEST_S3_* say where one is.
 */

const MiB = 1024 * 1024;
const s3 = s3TestSettings();
if (!s3)
  process.stderr.write('object store contract: S3 backend skipped (COFFER_TEST_S3_ENDPOINT is not set)\n');

interface Backend {
  name: string;
  open(): Promise<{ store: ObjectStore; close(): Promise<void> }>;
}

const local: Backend = {
  name: 'local',
  async open() {
    const dir = await mkdtemp(join(tmpdir(), 'coffer-contract-'));
    const base = `http://127.0.0.1:${await freePort()}`;
    const store = await createObjectStore(
      { kind: 'local' },
      { dataDir: dir, publicUrl: base, urlSigningSecret: 'contract' },
    );
    if (!isLocalStore(store)) throw new Error('expected the local store');
    const app = Fastify();
    installErrorHandling(app);
    await app.register(objectRoutes(store));
    await app.listen({ host: '127.0.0.1', port: Number(new URL(base).port) });
    return {
      store,
      async close() {
        await app.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
};

const backends: Backend[] = [local];
if (s3) {
  backends.push({
    name: 's3',
    async open() {
      const config: StorageConfig = { kind: 's3', ...s3, forcePathStyle: true, timeoutMs: 10_000 };
      const store = await createObjectStore(config, {
        dataDir: '/nonexistent',
        publicUrl: '',
        urlSigningSecret: '',
      });
      return { store, close: () => store.close() };
    },
  });
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const md5 = (data: Buffer) => createHash('md5').update(data).digest('hex');
const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000);
let counter = 0;
const newKey = () =>
  `proj_contract/file_${Date.now().toString(36)}${++counter}/01J${randomBytes(6).toString('hex')}`;

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function put(url: string, body: Buffer, contentType?: string) {
  return fetch(url, { method: 'PUT', body, headers: contentType ? { 'content-type': contentType } : {} });
}

async function storeError(promise: Promise<unknown>): Promise<StoreError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreError);
  return error as StoreError;
}

function tamper(url: string): string {
  const parsed = new URL(url);
  for (const name of ['X-Amz-Signature', 'sig']) {
    const sig = parsed.searchParams.get(name);
    if (sig) parsed.searchParams.set(name, sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0'));
  }
  return parsed.toString();
}

describe.each(backends)('object store contract: $name', (backend) => {
  let store: ObjectStore;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ store, close } = await backend.open());
  });
  afterAll(async () => {
    await close();
  });

  /** Uploads `data` through a presigned URL and seals it. */
  async function upload(data: Buffer, contentType = 'application/pdf'): Promise<string> {
    const key = newKey();
    const url = await store.presignUpload(key, { size: data.length, contentType, expiresAt: inSeconds(60) });
    expect((await put(url, data, contentType)).status).toBe(200);
    expect((await store.seal(key))?.size).toBe(data.length);
    return key;
  }

  describe('single uploads', () => {
    it('takes the declared bytes through the URL; seal makes them the object', async () => {
      const data = randomBytes(256 * 1024 + 3);
      const key = newKey();
      const url = await store.presignUpload(key, {
        size: data.length,
        contentType: 'image/png',
        expiresAt: inSeconds(60),
      });
      expect(await store.seal(key)).toBeUndefined(); // nothing uploaded yet
      const response = await put(url, data, 'image/png');
      expect(response.status).toBe(200);
      expect(response.headers.get('etag')).toMatch(/^"[0-9a-f]+"$/);
      const sealed = await store.seal(key);
      expect(sealed?.size).toBe(data.length);
      if (store.capabilities.sha256OnUpload) expect(sealed?.sha256).toBe(sha256(data));
      expect(await store.seal(key)).toEqual(sealed); // sealing again changes nothing
      expect((await store.head(key))?.size).toBe(data.length);
      expect((await collect(await store.read(key))).equals(data)).toBe(true);
    });

    it('takes an empty object', async () => {
      const key = await upload(Buffer.alloc(0), 'text/plain');
      expect((await store.head(key))?.size).toBe(0);
      expect((await collect(await store.read(key))).length).toBe(0);
    });

    it('refuses a body of another length, and stores nothing', async () => {
      const key = newKey();
      const url = await store.presignUpload(key, {
        size: 100,
        contentType: 'text/plain',
        expiresAt: inSeconds(60),
      });
      for (const body of [randomBytes(101), randomBytes(99)]) {
        const response = await put(url, body, 'text/plain');
        expect(response.status).toBeGreaterThanOrEqual(400);
        expect(response.status).toBeLessThan(500);
      }
      expect(await store.seal(key)).toBeUndefined();
    });

    it('refuses another content type than the signed one', async () => {
      const key = newKey();
      const data = Buffer.from('<html>');
      const url = await store.presignUpload(key, {
        size: data.length,
        contentType: 'image/png',
        expiresAt: inSeconds(60),
      });
      expect((await put(url, data, 'text/html')).status).toBe(403);
      expect(await store.seal(key)).toBeUndefined();
    });

    it('refuses a tampered, method-swapped or expired URL', async () => {
      const data = Buffer.from('signed bytes');
      const key = newKey();
      const url = await store.presignUpload(key, {
        size: data.length,
        contentType: 'text/plain',
        expiresAt: inSeconds(60),
      });
      expect((await put(tamper(url), data, 'text/plain')).status).toBe(403);
      expect((await fetch(url)).status).toBeGreaterThanOrEqual(400); // an upload URL reads nothing
      const other = url.replace(key, newKey());
      expect((await put(other, data, 'text/plain')).status).toBeGreaterThanOrEqual(400);
      expect(await store.seal(key)).toBeUndefined();

      const stored = await upload(data, 'text/plain');
      const download = await store.presignGet(stored, {
        expiresAt: inSeconds(60),
        filename: 'a.txt',
        contentType: 'text/plain',
      });
      expect((await put(download, Buffer.from('evil bytes!!'), 'text/plain')).status).toBe(403);
      expect((await fetch(tamper(download))).status).toBe(403);

      const short = await store.presignUpload(newKey(), {
        size: data.length,
        contentType: 'text/plain',
        expiresAt: inSeconds(1),
      });
      await sleep(2100);
      expect((await put(short, data, 'text/plain')).status).toBe(403);
      const expired = await store.presignGet(stored, {
        expiresAt: inSeconds(1),
        filename: 'a.txt',
        contentType: 'text/plain',
      });
      await sleep(2100);
      expect((await fetch(expired)).status).toBe(403);
      expect((await collect(await store.read(stored))).equals(data)).toBe(true);
    });

    it('never lets a URL expire before its expiry, whole seconds notwithstanding', async () => {
      // Late in a second, a lifetime counted from that second taken down would end almost at once.
      while (Date.now() % 1000 < 900) await sleep(5);
      const data = Buffer.from('just in time');
      const key = newKey();
      const url = await store.presignUpload(key, {
        size: data.length,
        contentType: 'text/plain',
        expiresAt: inSeconds(1),
      });
      await sleep(300);
      expect((await put(url, data, 'text/plain')).status).toBe(200);
    });

    it('is write-once: a sealed object keeps its bytes while its upload URL is still valid', async () => {
      const first = Buffer.from('the first bytes');
      const key = newKey();
      const url = await store.presignUpload(key, {
        size: first.length,
        contentType: 'text/plain',
        expiresAt: inSeconds(600),
      });
      expect((await put(url, first, 'text/plain')).status).toBe(200);
      await store.seal(key);
      const again = await put(url, Buffer.from('other bytes!!!!'), 'text/plain');
      expect(again.status).toBeGreaterThanOrEqual(400);
      expect(await store.seal(key)).toMatchObject({ size: first.length });
      expect((await collect(await store.read(key))).equals(first)).toBe(true);
    });
  });

  describe('server-side writes', () => {
    it('writes a stream of the declared size as a sealed object, hashed on the way', async () => {
      const data = randomBytes(3 * MiB + 5);
      const key = newKey();
      const info = await store.write(key, Readable.from([data.subarray(0, MiB), data.subarray(MiB)]), {
        size: data.length,
        contentType: 'application/pdf',
      });
      expect(info).toMatchObject({ size: data.length, sha256: sha256(data), etag: `"${md5(data)}"` });
      expect((await store.head(key))?.size).toBe(data.length);
      expect((await store.seal(key))?.size).toBe(data.length);
      expect(sha256(await collect(await store.read(key)))).toBe(sha256(data));
    });

    it('writes memory a native addon allocated (which cannot be moved to another thread)', async () => {
      // sharp's output buffers are such memory.
      const data = await sharp({
        create: {
          width: 700,
          height: 500,
          channels: 3,
          background: '#000',
          noise: { type: 'gaussian', mean: 128, sigma: 40 },
        },
      })
        .raw()
        .toBuffer();
      const key = newKey();
      const info = await store.write(key, Readable.from([data]), {
        size: data.length,
        contentType: 'image/x-raw',
      });
      expect(info).toMatchObject({ size: data.length, sha256: sha256(data) });
      expect(sha256(await collect(await store.read(key)))).toBe(sha256(data));
    });

    it('writes an empty object', async () => {
      const key = newKey();
      expect(await store.write(key, Readable.from([]), { size: 0, contentType: 'text/plain' })).toMatchObject(
        {
          size: 0,
          sha256: sha256(Buffer.alloc(0)),
        },
      );
      expect((await store.head(key))?.size).toBe(0);
    });

    it('refuses a stream longer or shorter than declared, and leaves no object', async () => {
      for (const data of [randomBytes(101), randomBytes(99)]) {
        const key = newKey();
        const writing = store.write(key, Readable.from([data]), { size: 100, contentType: 'text/plain' });
        await expect(writing).rejects.toMatchObject({ name: 'StoreError', code: 'InvalidArgument' });
        expect(await store.head(key)).toBeUndefined();
      }
    });

    it("leaves no object when the stream fails midway, and answers the stream's own error", async () => {
      const key = newKey();
      const failing = new PassThrough();
      const writing = store.write(key, failing, { size: 2 * MiB, contentType: 'text/plain' });
      failing.write(randomBytes(MiB));
      setTimeout(() => failing.destroy(new Error('client went away')), 50);
      await expect(writing).rejects.toThrow('client went away');
      expect(await store.head(key)).toBeUndefined();
      // A part's likewise (a body whose digest its reader found wrong, say): the caller answers it.
      const uploadId = await store.createMultipart(key, { contentType: 'text/plain', totalSize: 2 * MiB });
      const part = new PassThrough();
      const writingPart = store.writePart(key, uploadId, 1, part, 2 * MiB);
      part.write(randomBytes(MiB));
      setTimeout(() => part.destroy(new Error('digest mismatch')), 50);
      await expect(writingPart).rejects.toThrow('digest mismatch');
      await store.delete(key);
    });
  });

  describe('server-side parts', () => {
    it('writes parts from streams and assembles them', async () => {
      const key = newKey();
      const first = randomBytes(5 * MiB);
      const last = randomBytes(1234);
      // Digests first: a store may hand the buffers' memory over to the thread that writes them.
      const expected = {
        etags: [`"${md5(first)}"`, `"${md5(last)}"`],
        sha256: sha256(Buffer.concat([first, last])),
      };
      const sizes = [first.length, last.length];
      const uploadId = await store.createMultipart(key, {
        contentType: 'text/plain',
        totalSize: first.length + last.length,
      });
      const etags = [
        await store.writePart(key, uploadId, 1, Readable.from([first]), sizes[0]!),
        await store.writePart(key, uploadId, 2, Readable.from([last]), sizes[1]!),
      ];
      expect(etags).toEqual(expected.etags);
      expect((await store.listParts(key, uploadId)).map((part) => part.size)).toEqual(sizes);
      await store.completeMultipart(
        key,
        uploadId,
        etags.map((etag, index) => ({ partNumber: index + 1, etag })),
      );
      expect(sha256(await collect(await store.read(key)))).toBe(expected.sha256);
    });

    it('completes parts written without their MD5 with the tokens they answered, the newest version winning', async () => {
      const key = newKey();
      const replaced = randomBytes(5 * MiB);
      const first = randomBytes(5 * MiB);
      const last = randomBytes(1234);
      const expected = sha256(Buffer.concat([first, last]));
      const uploadId = await store.createMultipart(key, {
        contentType: 'text/plain',
        totalSize: first.length + last.length,
      });
      const write = (partNumber: number, bytes: Buffer) =>
        store.writePart(key, uploadId, partNumber, Readable.from([bytes]), bytes.length, { md5: false });
      const stale = await write(1, replaced);
      const etags = [await write(1, first), await write(2, last)];
      expect(etags[0]).not.toBe(stale);
      expect((await store.listParts(key, uploadId)).map((part) => part.etag)).toEqual(etags);
      await store.completeMultipart(
        key,
        uploadId,
        etags.map((etag, index) => ({ partNumber: index + 1, etag })),
      );
      expect(sha256(await collect(await store.read(key)))).toBe(expected);
      if (store.capabilities.sha256OnUpload) expect((await store.head(key))?.sha256).toBe(expected);
    });

    it('tells the parts of an assembled object: where each lies, and how many there are', async () => {
      const key = newKey();
      const parts = [randomBytes(5 * MiB), randomBytes(1234)];
      // Copies: a store may hand the buffers' memory over to the thread that writes them.
      const whole = Buffer.concat(parts);
      const last = Buffer.from(parts[1]!);
      const uploadId = await store.createMultipart(key, {
        contentType: 'text/plain',
        totalSize: whole.length,
      });
      const completed = [];
      for (const [index, bytes] of parts.entries()) {
        const etag = await store.writePart(key, uploadId, index + 1, Readable.from([bytes]), bytes.length);
        completed.push({ partNumber: index + 1, etag });
      }
      await store.completeMultipart(key, uploadId, completed);
      const first = await store.headPart(key, 1);
      // The local store keeps the parts; an S3 server that ignores partNumber shows the whole object.
      if (backend.name === 'local' || first?.partsCount !== undefined) {
        expect(first).toEqual({ range: { start: 0, end: 5 * MiB - 1 }, partsCount: 2 });
        const second = await store.headPart(key, 2);
        expect(second).toEqual({ range: { start: 5 * MiB, end: whole.length - 1 }, partsCount: 2 });
        expect((await collect(await store.read(key, second!.range))).equals(last)).toBe(true);
        expect(await storeError(store.headPart(key, 3))).toMatchObject({ code: 'InvalidRange' });
      } else {
        expect(first).toEqual({ range: { start: 0, end: whole.length - 1 }, partsCount: undefined });
        expect(await storeError(store.headPart(key, 2))).toMatchObject({ code: 'InvalidRange' });
      }
    });

    it('refuses a part stream of another length than declared, keeping no part', async () => {
      const key = newKey();
      const uploadId = await store.createMultipart(key, { contentType: 'text/plain', totalSize: 1000 });
      const writing = store.writePart(key, uploadId, 1, Readable.from([randomBytes(99)]), 100);
      await expect(writing).rejects.toMatchObject({ name: 'StoreError' });
      expect(await store.listParts(key, uploadId)).toEqual([]);
      await store.abortMultipart(key, uploadId);
    });
  });

  describe('reads', () => {
    it('heads and reads ranges; a missing object is NoSuchKey', async () => {
      const data = randomBytes(64 * 1024);
      const key = await upload(data);
      expect(
        (await collect(await store.read(key, { start: 10, end: 19 }))).equals(data.subarray(10, 20)),
      ).toBe(true);
      expect(
        (await collect(await store.read(key, { start: data.length - 5, end: data.length - 1 }))).equals(
          data.subarray(-5),
        ),
      ).toBe(true);
      expect(await store.head(newKey())).toBeUndefined();
      expect((await storeError(store.read(newKey()).then(collect))).code).toBe('NoSuchKey');
    });

    it('answers an object written whole as its one part; a missing object has none', async () => {
      const key = newKey();
      // The size first: a store may hand the buffer's memory over to the thread that writes it.
      const size = 100_000;
      await store.write(key, Readable.from([randomBytes(size)]), { size, contentType: 'text/plain' });
      expect(await store.headPart(key, 1)).toEqual({
        range: { start: 0, end: size - 1 },
        partsCount: undefined,
      });
      expect(await storeError(store.headPart(key, 2))).toMatchObject({ code: 'InvalidRange' });
      const empty = newKey();
      await store.write(empty, Readable.from([]), { size: 0, contentType: 'text/plain' });
      expect(await store.headPart(empty, 1)).toEqual({ range: undefined, partsCount: undefined });
      expect(await store.headPart(newKey(), 1)).toBeUndefined();
    });

    it('serves a download URL as an attachment of the signed type, with ranges', async () => {
      const data = Buffer.from('%PDF-1.7 download me');
      const key = await upload(data);
      const url = await store.presignGet(key, {
        expiresAt: inSeconds(60),
        filename: 'Report 2026.pdf',
        contentType: 'application/pdf',
      });
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/pdf');
      expect(response.headers.get('content-disposition')).toMatch(
        /^attachment; filename="?Report 2026\.pdf"?$/,
      );
      expect(Buffer.from(await response.arrayBuffer()).equals(data)).toBe(true);
      const ranged = await fetch(url, { headers: { range: 'bytes=0-3' } });
      expect(ranged.status).toBe(206);
      expect(await ranged.text()).toBe('%PDF');
    });

    it('deletes idempotently', async () => {
      const key = await upload(Buffer.from('short-lived'));
      await store.delete(key);
      expect(await store.head(key)).toBeUndefined();
      await store.delete(key);
      await store.delete(newKey());
    });

    it('refuses keys outside its scheme', async () => {
      for (const key of ['../escape', 'a//b', '/abs', 'a/../b', '']) {
        expect((await storeError(store.head(key))).code).toBe('InvalidArgument');
      }
    });
  });

  describe('multipart uploads', () => {
    const partA = randomBytes(5 * MiB);
    const partB = randomBytes(1234567);

    async function sendPart(key: string, uploadId: string, partNumber: number, body: Buffer) {
      const url = await store.presignPart(key, uploadId, partNumber, {
        expiresAt: inSeconds(600),
        size: body.length,
      });
      const response = await put(url, body);
      expect(response.status).toBe(200);
      return response.headers.get('etag')!;
    }

    async function start(total: number) {
      const key = newKey();
      const uploadId = await store.createMultipart(key, {
        contentType: 'application/octet-stream',
        totalSize: total,
      });
      return { key, uploadId };
    }

    it('assembles parts sent out of order; the part URLs are dead afterwards', async () => {
      const { key, uploadId } = await start(partA.length + partB.length);
      const etagB = await sendPart(key, uploadId, 2, partB);
      const etagA = await sendPart(key, uploadId, 1, partA);
      expect(etagA).toBe(`"${md5(partA)}"`);
      expect(await store.listParts(key, uploadId)).toEqual([
        { partNumber: 1, etag: etagA, size: partA.length },
        { partNumber: 2, etag: etagB, size: partB.length },
      ]);
      const info = await store.completeMultipart(key, uploadId, [
        { partNumber: 1, etag: etagA },
        { partNumber: 2, etag: etagB },
      ]);
      expect(info.size).toBe(partA.length + partB.length);
      expect(info.etag).toMatch(/-2"$/);
      const whole = Buffer.concat([partA, partB]);
      expect(sha256(await collect(await store.read(key)))).toBe(sha256(whole));
      const across = await collect(await store.read(key, { start: partA.length - 5, end: partA.length + 4 }));
      expect(across.equals(whole.subarray(partA.length - 5, partA.length + 5))).toBe(true);
      // No part can be sent or completed any more.
      const late = await store
        .presignPart(key, uploadId, 1, { expiresAt: inSeconds(60), size: 5 })
        .catch(() => undefined);
      if (late) expect((await put(late, Buffer.from('later'))).status).toBeGreaterThanOrEqual(400);
      expect(sha256(await collect(await store.read(key)))).toBe(sha256(whole));
      expect((await storeError(store.listParts(key, uploadId))).code).toBe('NoSuchUpload');
    });

    it('a re-sent part replaces the earlier one', async () => {
      const { key, uploadId } = await start(10);
      await sendPart(key, uploadId, 1, Buffer.from('aaaaaaaaaa'));
      const etag = await sendPart(key, uploadId, 1, Buffer.from('bbbbbbbbbb'));
      expect(await store.listParts(key, uploadId)).toEqual([{ partNumber: 1, etag, size: 10 }]);
      await store.completeMultipart(key, uploadId, [{ partNumber: 1, etag }]);
      expect((await collect(await store.read(key))).toString()).toBe('bbbbbbbbbb');
    });

    it('refuses a part of another size than its URL was signed for', async () => {
      const { key, uploadId } = await start(100);
      const url = await store.presignPart(key, uploadId, 1, { expiresAt: inSeconds(60), size: 50 });
      const response = await put(url, randomBytes(60));
      expect(response.status).toBeGreaterThanOrEqual(400);
      expect(response.status).toBeLessThan(500);
      expect(await store.listParts(key, uploadId)).toEqual([]);
      await store.abortMultipart(key, uploadId);
    });

    it("keeps S3's part rules at complete: matching ETags, 5 MiB for every part but the last", async () => {
      const { key, uploadId } = await start(2 * MiB);
      const small = await sendPart(key, uploadId, 1, randomBytes(MiB));
      const last = await sendPart(key, uploadId, 2, randomBytes(MiB));
      const wrong = await storeError(
        store.completeMultipart(key, uploadId, [
          { partNumber: 1, etag: small },
          { partNumber: 2, etag: '"00000000000000000000000000000000"' },
        ]),
      );
      expect(wrong.code).toBe('InvalidPart');
      const tooSmall = await storeError(
        store.completeMultipart(key, uploadId, [
          { partNumber: 1, etag: small },
          { partNumber: 2, etag: last },
        ]),
      );
      expect(tooSmall.code).toBe('InvalidPart');
      expect(await store.head(key)).toBeUndefined();
      await store.abortMultipart(key, uploadId);
    });

    it('aborts idempotently; an aborted upload takes no part', async () => {
      const { key, uploadId } = await start(10);
      const url = await store.presignPart(key, uploadId, 1, { expiresAt: inSeconds(60), size: 10 });
      await store.abortMultipart(key, uploadId);
      await store.abortMultipart(key, uploadId);
      expect((await storeError(store.listParts(key, uploadId))).code).toBe('NoSuchUpload');
      expect((await put(url, randomBytes(10))).status).toBe(404);
      expect(await store.head(key)).toBeUndefined();
    });

    it('a complete racing an abort either assembles the whole object or leaves none', async () => {
      for (let round = 0; round < 3; round++) {
        const { key, uploadId } = await start(partB.length);
        const etag = await sendPart(key, uploadId, 1, partB);
        const [completed] = await Promise.allSettled([
          store.completeMultipart(key, uploadId, [{ partNumber: 1, etag }]),
          store.abortMultipart(key, uploadId),
        ]);
        const head = await store.head(key);
        if (completed.status === 'fulfilled') {
          expect(head?.size).toBe(partB.length);
          expect(sha256(await collect(await store.read(key)))).toBe(sha256(partB));
        } else {
          expect(head).toBeUndefined();
        }
      }
    });

    it('a deleted key takes its unfinished uploads with it', async () => {
      const key = newKey();
      const url = await store.presignUpload(key, {
        size: 4,
        contentType: 'text/plain',
        expiresAt: inSeconds(60),
      });
      expect((await put(url, Buffer.from('abcd'), 'text/plain')).status).toBe(200);
      await store.delete(key);
      expect(await store.seal(key)).toBeUndefined();
    });
  });

  describe('removing what unfinished uploads left behind', () => {
    /** Every upload but those of `gone` is kept: the store may hold other tests' uploads (S3's one bucket). */
    const except =
      (...gone: string[]) =>
      async (key: string) =>
        !gone.includes(key);

    async function startWithPart(size: number) {
      const key = newKey();
      const uploadId = await store.createMultipart(key, { contentType: 'text/plain', totalSize: size });
      const url = await store.presignPart(key, uploadId, 1, { expiresAt: inSeconds(60), size });
      expect((await put(url, randomBytes(size))).status).toBe(200);
      return { key, uploadId };
    }

    it('aborts the multipart uploads started before the cutoff that are not kept, and only those', async () => {
      const left = await startWithPart(10);
      const live = await startWithPart(12);
      // Started after the cutoff: too young to be judged, whatever keep says.
      expect(await store.removeStale(inSeconds(-3600), except(left.key, live.key))).toBe(0);
      expect(await store.listParts(left.key, left.uploadId)).toHaveLength(1);

      const asked: string[] = [];
      const keep = async (key: string) => {
        asked.push(key);
        return key !== left.key;
      };
      expect(await store.removeStale(inSeconds(60), keep)).toBe(1);
      expect(asked).toEqual(expect.arrayContaining([left.key, live.key]));
      expect((await storeError(store.listParts(left.key, left.uploadId))).code).toBe('NoSuchUpload');
      expect(await store.listParts(live.key, live.uploadId)).toEqual([
        { partNumber: 1, etag: expect.any(String), size: 12 },
      ]);
      expect(await store.head(left.key)).toBeUndefined();
      await store.abortMultipart(live.key, live.uploadId);
    });

    it('never touches a sealed or assembled object', async () => {
      const data = randomBytes(2048);
      const sealed = await upload(data);
      const parts = await startWithPart(7);
      const [part] = await store.listParts(parts.key, parts.uploadId);
      await store.completeMultipart(parts.key, parts.uploadId, [{ partNumber: 1, etag: part!.etag }]);
      expect(await store.removeStale(inSeconds(60), except(sealed, parts.key))).toBe(0);
      expect(sha256(await collect(await store.read(sealed)))).toBe(sha256(data));
      expect((await store.head(parts.key))?.size).toBe(7);
    });
  });

  it('answers its readiness check', async () => {
    await store.check();
  });
});
