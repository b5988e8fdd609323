import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { MIN_PART_SIZE } from '../../src/infra/storage/object-store.ts';
import {
  collect,
  dir,
  expectError,
  expectNoTrace,
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
