import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readLine, SMALL_BODY } from '../../src/infra/storage/local/files.ts';
import { createLocalStore, type LocalObjectStore } from '../../src/infra/storage/local/store.ts';
import { MIN_PART_SIZE } from '../../src/infra/storage/object-store.ts';

/** What a backup takes from the local store: the files of each object, and deletions that wait. */

let dir: string;
let store: LocalObjectStore;
let counter = 0;
const newKey = () => `proj_objects/file_${++counter}/01HZX${String(counter).padStart(6, '0')}`;
const expires = () => Math.ceil(Date.now() / 1000) + 60;
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const text = async (stream: AsyncIterable<Buffer>) => {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks);
};

async function put(data: Buffer): Promise<string> {
  const key = newKey();
  await store.receive(
    { kind: 'put', key, expires: expires(), size: data.length, contentType: 'text/plain' },
    Readable.from([data]),
  );
  return key;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-objects-'));
  store = createLocalStore({ dir, publicUrl: 'http://unused', secret: 'objects' });
});

afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the files of an object', () => {
  it('are its bytes then its sidecar (its bytes its own file); the segments of an assembled one in order; none for a missing one', async () => {
    // The store takes over the memory of what it receives: hashes first.
    const data = randomBytes(SMALL_BODY + 1);
    const expected = sha256(data);
    const key = await put(data);
    const files = await store.objectFiles(key);
    expect(files).toEqual([key, `${key}.meta.json`]);
    expect(sha256(await readFile(join(dir, files[0]!)))).toBe(expected);
    expect(await store.ownFile(key)).toEqual({ path: join(dir, key), size: SMALL_BODY + 1 });

    const parts = [randomBytes(MIN_PART_SIZE), randomBytes(10)];
    const whole = sha256(Buffer.concat(parts));
    const assembled = newKey();
    const uploadId = await store.createMultipart(assembled, {
      contentType: 'text/plain',
      totalSize: 2 * MIN_PART_SIZE,
    });
    const etags = [];
    for (const [index, part] of parts.entries()) {
      const partNumber = index + 1;
      etags.push({
        partNumber,
        etag: await store.receive(
          { kind: 'part', key: assembled, expires: expires(), uploadId, partNumber },
          Readable.from([part]),
        ),
      });
    }
    await store.completeMultipart(assembled, uploadId, etags);
    const segments = await store.objectFiles(assembled);
    expect(segments).toEqual([`${assembled}.parts/0`, `${assembled}.parts/1`, `${assembled}.meta.json`]);
    const bytes = Buffer.concat(
      await Promise.all(segments.slice(0, 2).map((path) => readFile(join(dir, path)))),
    );
    expect(sha256(bytes)).toBe(whole);
    expect(await store.ownFile(assembled)).toBeUndefined();

    expect(await store.objectFiles(newKey())).toEqual([]);
    await expect(store.ownFile(newKey())).rejects.toMatchObject({ code: 'NoSuchKey' });
  });
});

describe('a small object', () => {
  it('is its sidecar alone: a first line that describes it, then its bytes, read whole and in ranges', async () => {
    for (const size of [0, 1, 1000, SMALL_BODY]) {
      // Newlines in the bytes, as a text file has: only the first line of the sidecar describes it.
      const data = Buffer.concat([Buffer.from('line\n'), randomBytes(size)]).subarray(0, size);
      const key = await put(data);
      expect(await store.objectFiles(key)).toEqual([`${key}.meta.json`]);
      expect(await store.ownFile(key)).toBeUndefined();
      const sidecar = await readFile(join(dir, `${key}.meta.json`));
      const end = sidecar.indexOf('\n');
      expect(JSON.parse(sidecar.subarray(0, end).toString())).toEqual({
        size,
        etag: `"${sha256(data)}"`,
        sha256: sha256(data),
        inline: true,
      });
      expect(sidecar.subarray(end + 1)).toEqual(data);
      expect(await store.head(key)).toEqual({ size, etag: `"${sha256(data)}"`, sha256: sha256(data) });
      expect(await text(await store.read(key))).toEqual(data);
      if (size > 10)
        expect(await text(await store.read(key, { start: 3, end: 9 }))).toEqual(data.subarray(3, 10));
    }
  });

  it('is stored once: a second PUT through its URL is refused and leaves the first', async () => {
    const data = Buffer.from('first');
    const key = await put(data);
    const again = store.receive(
      { kind: 'put', key, expires: expires(), size: 5, contentType: 'text/plain' },
      Readable.from([Buffer.from('other')]),
    );
    await expect(again).rejects.toMatchObject({ code: 'AlreadyExists' });
    expect(await text(await store.read(key))).toEqual(data);
  });

  it('is refused whole when its body is not the declared length, and leaves nothing', async () => {
    const key = newKey();
    for (const body of ['shor', 'longer']) {
      const receiving = store.receive(
        { kind: 'put', key, expires: expires(), size: 5, contentType: 'text/plain' },
        Readable.from([Buffer.from(body)]),
      );
      await expect(receiving).rejects.toMatchObject({ code: 'InvalidArgument' });
      expect(await store.head(key)).toBeUndefined();
    }
    expect(await readdir(join(dir, '.tmp'))).toEqual([]);
  });
});

describe('the first line of a file', () => {
  it('is read up to its newline however long it is, or is the whole file without one', async () => {
    const path = join(dir, 'line');
    const bytes = Buffer.from('after\nmore\n');
    for (const length of [0, 10, 4095, 4096, 4097, 20_000]) {
      const line = Buffer.from(`${'x'.repeat(length)}\n`);
      await writeFile(path, Buffer.concat([line, bytes]));
      const read = await readLine(path);
      expect(read.line).toEqual(line);
      // What came in with the line: the start of what follows it, all of it after a short line.
      expect(read.after).toEqual(bytes.subarray(0, read.after.length));
      if (length <= 10) expect(read.after).toEqual(bytes);
      await writeFile(path, line.subarray(0, length));
      expect(await readLine(path)).toEqual({ line: line.subarray(0, length), after: Buffer.alloc(0) });
    }
    await expect(readLine(join(dir, 'missing'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('holding deletions', () => {
  it('makes delete wait until every hold is released', async () => {
    const key = await put(Buffer.from('kept while held'));
    const first = store.holdDeletes();
    const second = store.holdDeletes();
    let deleted = false;
    const deleting = store.delete(key).then(() => {
      deleted = true;
    });
    first();
    first(); // releasing twice counts once
    await sleep(50);
    expect(deleted).toBe(false);
    expect(await store.head(key)).toBeDefined();
    second();
    await deleting;
    expect(await store.head(key)).toBeUndefined();
    // Nothing held any more: deletions run at once.
    await store.delete(await put(Buffer.from('x')));
  });
});
