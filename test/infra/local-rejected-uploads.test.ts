import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Exchange } from '../support/exchange.ts';
import {
  base,
  collect,
  expectError,
  expectNoTrace,
  inSeconds,
  newKey,
  put,
  putStream,
  serveLocalStore,
  store,
  tmpFiles,
  upload,
} from '../support/local-store.ts';

serveLocalStore();

async function eventually(check: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await sleep(10);
  }
}

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

  it('answers a too long chunked body as soon as it is too long, before the rest is sent', async () => {
    const key = newKey();
    const url = new URL(await presign(key));
    const req = httpRequest(url, { method: 'PUT', headers: { 'content-type': 'text/plain' } });
    req.on('error', () => {});
    req.write(Buffer.alloc(size + 1)); // chunked, and never ended
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(400);
    expect(JSON.parse((await collect(res)).toString()).error.code).toBe('BAD_REQUEST');
    req.destroy();
    await expectNoTrace(key);
  });

  it('reads through the rest of a body refused mid-way: a request sent after it on its connection is answered', async () => {
    const key = newKey();
    const url = new URL(await presign(key));
    const exchange = new Exchange(base, 'PUT', `${url.pathname}${url.search}`, {
      'content-type': 'text/plain',
      'transfer-encoding': 'chunked',
    });
    // One chunk of 1 MiB, past the signed size: refused once the size is passed, mid-chunk.
    const chunk = 1024 * 1024;
    await exchange.write(Buffer.concat([Buffer.from(`${chunk.toString(16)}\r\n`), Buffer.alloc(size + 1)]));
    const refused = await exchange.next();
    expect(refused.status).toBe(400);
    // The rest, more than the server buffers, then the next request, as a keep-alive client sends them.
    void exchange
      .write(
        Buffer.concat([
          Buffer.alloc(chunk - size - 1),
          Buffer.from(`\r\n0\r\n\r\nGET ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\n\r\n`),
        ]),
      )
      .catch(() => undefined);
    const next = await exchange.nextWithin(10_000);
    exchange.close();
    // The GET of a PUT URL: refused, but answered.
    expect(next?.status).toBe(403);
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
