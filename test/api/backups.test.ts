import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLocalStore } from '../../src/infra/storage/local/store.ts';
import { createBackup } from '../../src/modules/backups/backup.ts';
import { BackupError } from '../../src/modules/backups/manifest.ts';
import { backend } from '../support/backends.ts';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';
import { upload } from '../support/files.ts';

// The whole round trip through coffer backup and coffer restore: test/cli/backup.test.ts.

let coffer: TestCoffer;
const temp = mkdtempSync(join(tmpdir(), 'coffer-backups-'));
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(async () => {
  await coffer.close();
  rmSync(temp, { recursive: true, force: true });
});

describe('createBackup', () => {
  it.skipIf(backend !== 'embedded')(
    'stopped half-way, leaves its folder empty and deletions free',
    async () => {
      const project = await coffer.newProject();
      const file = (await upload(project, { bytes: 'to be backed up' })).body;
      const { db, store } = coffer.services;
      const stop = new AbortController();
      stop.abort();
      const dir = join(temp, 'stopped');
      await expect(createBackup(db, store, dir, stop.signal)).rejects.toMatchObject({ name: 'AbortError' });
      expect(readdirSync(dir)).toEqual([]);
      if (isLocalStore(store)) expect(await store.objectFiles(file.storage_key)).toHaveLength(2);
      await store.delete(file.storage_key); // not held any more
      expect(await store.head(file.storage_key)).toBeUndefined();
    },
  );

  it('refuses a folder that is not empty, and a database that is not embedded', async () => {
    const { db, store } = coffer.services;
    const full = join(temp, 'full');
    mkdirSync(full);
    writeFileSync(join(full, 'notes.txt'), 'kept');
    const error = await createBackup(db, store, full).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackupError);
    expect((error as Error).message).toMatch(
      backend === 'embedded' ? /is not empty/ : /coffer backup copies the embedded database; PostgreSQL/,
    );
    expect(readdirSync(full)).toEqual(['notes.txt']);
  });
});
