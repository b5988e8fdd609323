import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_PART_SIZE, MIN_PART_SIZE } from '../../src/infra/storage/object-store.ts';
import {
  dir,
  expectError,
  fullPart,
  inSeconds,
  MULTIPART_TOTAL,
  md5,
  newKey,
  put,
  putStream,
  serveLocalStore,
  sha256,
  store,
  storeError,
  tmpFiles,
} from '../support/local-store.ts';

serveLocalStore();

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
