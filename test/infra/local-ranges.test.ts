import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  collect,
  expectError,
  inSeconds,
  newKey,
  serveLocalStore,
  store,
  storeError,
  upload,
} from '../support/local-store.ts';

serveLocalStore();

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
