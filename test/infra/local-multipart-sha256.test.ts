import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import { writers } from '../../src/infra/storage/writer-pool.ts';
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
  receiver,
  serveLocalStore,
  sha256,
  store,
  storeError,
} from '../support/local-store.ts';

serveLocalStore();

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
