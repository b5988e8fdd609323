import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalStore, type LocalObjectStore } from '../../src/infra/storage/local/store.ts';

/**
 * What the local store's removeStale takes beyond the store contract (test/contract): temp files,
 * which carry no key and go by when they were last written, and upload folders without a manifest.
 */

let dir: string;
let store: LocalObjectStore;
let counter = 0;
const newKey = () => `proj_stale/file_${++counter}/01HZX${String(counter).padStart(6, '0')}`;
const tmp = () => join(dir, '.tmp');
const uploadFolder = (uploadId: string) => join(dir, '.multipart', uploadId);
const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000);
const expires = () => Math.ceil(inSeconds(60).getTime() / 1000);
/** An hour ago: older than any cutoff the tests use. */
const longAgo = () => new Date(Date.now() - 3600_000);
const keepNothing = async () => false;
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

async function eventually<T>(check: () => Promise<T | undefined>): Promise<T> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const value = await check();
    if (value !== undefined) return value;
    await sleep(10);
  }
  throw new Error('condition not reached in time');
}

/** A request body that sends `first`, then waits for release() to send `rest`. */
function pausedBody(first: Buffer, rest: Buffer) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  async function* body() {
    yield first;
    await released;
    yield rest;
  }
  return { body: body(), release };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-stale-'));
  store = createLocalStore({ dir, publicUrl: 'http://unused', secret: 'stale' });
});

afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('removeStale on the local store', () => {
  it('removes temp files last written before the cutoff, but never one this process is writing', async () => {
    await mkdir(tmp(), { recursive: true });
    await writeFile(join(tmp(), 'left-by-a-crash'), randomBytes(1000));
    await utimes(join(tmp(), 'left-by-a-crash'), longAgo(), longAgo());
    await writeFile(join(tmp(), 'recent'), randomBytes(10));

    // An upload whose client pauses longer than the cutoff: its temp file is old, yet it is in progress.
    const key = newKey();
    const data = randomBytes(300_000);
    const { body, release } = pausedBody(data.subarray(0, 100_000), data.subarray(100_000));
    const receiving = store.receive(
      { kind: 'put', key, expires: expires(), size: data.length, contentType: 'text/plain' },
      body,
    );
    const writing = await eventually(async () =>
      (await readdir(tmp())).find((name) => name !== 'left-by-a-crash' && name !== 'recent'),
    );
    await utimes(join(tmp(), writing), longAgo(), longAgo());

    expect(await store.removeStale(inSeconds(-60), keepNothing)).toBe(1);
    expect((await readdir(tmp())).sort()).toEqual([writing, 'recent'].sort());

    release();
    await receiving;
    expect((await store.head(key))?.sha256).toBe(sha256(data));
    await rm(join(tmp(), 'recent'));
  });

  it('removes an upload folder without its manifest (a complete or abort cut short) once untouched since the cutoff', async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, { contentType: 'text/plain', totalSize: 10 });
    await store.receive(
      { kind: 'part', key, expires: expires(), uploadId, partNumber: 1 },
      Readable.from([Buffer.from('0123456789')]),
    );
    // As a crash right after complete or abort removed the manifest leaves it.
    await rm(join(uploadFolder(uploadId), 'upload.json'));
    expect(await store.removeStale(inSeconds(-60), keepNothing)).toBe(0);
    expect(existsSync(uploadFolder(uploadId))).toBe(true);

    await utimes(uploadFolder(uploadId), longAgo(), longAgo());
    expect(await store.removeStale(inSeconds(-60), keepNothing)).toBe(1);
    expect(existsSync(uploadFolder(uploadId))).toBe(false);
  });

  it('keeps an old multipart upload while its key is kept, and takes no part once it is removed', async () => {
    const key = newKey();
    const uploadId = await store.createMultipart(key, { contentType: 'text/plain', totalSize: 10 });
    await utimes(join(uploadFolder(uploadId), 'upload.json'), longAgo(), longAgo());
    const asked: string[] = [];
    const keepIt = async (candidate: string) => {
      asked.push(candidate);
      return true;
    };
    expect(await store.removeStale(inSeconds(-60), keepIt)).toBe(0);
    expect(asked).toEqual([key]);
    await store.receive(
      { kind: 'part', key, expires: expires(), uploadId, partNumber: 1 },
      Readable.from([Buffer.from('0123456789')]),
    );
    expect(await store.listParts(key, uploadId)).toHaveLength(1);

    expect(await store.removeStale(inSeconds(-60), keepNothing)).toBe(1);
    expect(existsSync(uploadFolder(uploadId))).toBe(false);
    await expect(
      store.receive(
        { kind: 'part', key, expires: expires(), uploadId, partNumber: 2 },
        Readable.from([Buffer.from('x')]),
      ),
    ).rejects.toMatchObject({ code: 'NoSuchUpload' });
    expect(await readdir(tmp())).toEqual([]);
  });
});
