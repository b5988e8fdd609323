import { randomBytes } from 'node:crypto';
import { parse as parseDisposition } from 'content-disposition';
import { describe, expect, it } from 'vitest';
import {
  base,
  collect,
  expectError,
  inSeconds,
  newKey,
  put,
  putStream,
  serveLocalStore,
  sha256,
  store,
  tmpFiles,
  upload,
} from '../support/local-store.ts';

serveLocalStore();

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
