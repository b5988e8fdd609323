import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SMALL_BODY } from '../../src/infra/storage/local/files.ts';
import { createLocalStore, type LocalObjectStore } from '../../src/infra/storage/local/store.ts';

/**
 * Keys of one file share a folder (`<project>/<file>/<id>`), which a delete prunes once it leaves it
 * empty: objects stored into that folder meanwhile (a tus upload's next bytes while the bytes that went
 * into a part are removed) must not fail for it.
 */

let dir: string;
let store: LocalObjectStore;
let counter = 0;
const ROUNDS = 150;
// A small object (stored in its sidecar) and one stored beside its sidecar: each places its file its own way.
const SIZES = [100, SMALL_BODY + 1];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-folders-'));
  store = createLocalStore({ dir, publicUrl: 'http://unused', secret: 'folders' });
});

afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const keyIn = (file: string) => `proj_folders/${file}/01HZX${String(++counter).padStart(6, '0')}`;
const write = (key: string, size: number) =>
  store.write(key, Readable.from([Buffer.alloc(size, 1)]), { size, contentType: 'application/octet-stream' });

describe('a folder pruned by a delete while another key is stored into it', () => {
  it.each(SIZES)('still takes every object written meanwhile (%i bytes)', async (size) => {
    // Without retrying, about one round in six failed with Unavailable (ENOENT from mkdir or link).
    for (let round = 0; round < ROUNDS; round++) {
      const file = `file_${size}_${round}`;
      const old = [keyIn(file), keyIn(file)];
      for (const key of old) await write(key, size);
      const next = keyIn(file);
      await Promise.all([...old.map((key) => store.delete(key)), write(next, size)]);
      expect(await store.head(next)).toMatchObject({ size });
      await store.delete(next);
    }
  });
});
