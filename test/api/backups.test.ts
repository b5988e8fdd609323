import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLocalStore } from '../../src/infra/storage/local/store.ts';
import { createBackup } from '../../src/modules/backups/backup.ts';
import { BackupError, readManifest } from '../../src/modules/backups/manifest.ts';
import { restoreBackup } from '../../src/modules/backups/restore.ts';
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
      if (isLocalStore(store))
        expect(await store.objectFiles(file.storage_key)).toEqual([`${file.storage_key}.meta.json`]);
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

describe.skipIf(backend !== 'embedded')('the server key in a backup', () => {
  const keyText = (key: Buffer) => `${key.toString('base64')}\n`;

  it('is left out unless asked for, then written as secret.key (mode 0600) and listed in the manifest', async () => {
    const { db, store } = coffer.services;
    const without = join(temp, 'without-key');
    expect((await createBackup(db, store, without)).secretKey).toBe(false);
    expect(readdirSync(without)).not.toContain('secret.key');

    const key = randomBytes(32);
    const withKey = join(temp, 'with-key');
    expect((await createBackup(db, store, withKey, undefined, { secretKey: key })).secretKey).toBe(true);
    expect(readFileSync(join(withKey, 'secret.key'), 'utf8')).toBe(keyText(key));
    expect(statSync(join(withKey, 'secret.key')).mode & 0o777).toBe(0o600);
    const manifest = await readManifest(withKey);
    expect(manifest.files.map((file) => file.path)).toContain('secret.key');
  });

  it('is put back by a restore; another key in the data dir is replaced only with force', async () => {
    const { db, store } = coffer.services;
    const key = randomBytes(32);
    const backup = join(temp, 'restore-key');
    await createBackup(db, store, backup, undefined, { secretKey: key });
    const config = { ...coffer.config, dataDir: join(temp, 'restored-key') };

    const restored = await restoreBackup(backup, config, { force: false });
    expect(restored.secretKey).toBe(true);
    const path = join(config.dataDir, 'secret.key');
    expect(readFileSync(path, 'utf8')).toBe(keyText(key));
    expect(statSync(path).mode & 0o777).toBe(0o600);

    const other = { ...coffer.config, dataDir: join(temp, 'other-key') };
    mkdirSync(other.dataDir);
    writeFileSync(join(other.dataDir, 'secret.key'), keyText(randomBytes(32)));
    const refused = await restoreBackup(backup, other, { force: false }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BackupError);
    expect((refused as Error).message).toMatch(/holds another server key \(secret\.key\).*--force/);
    await restoreBackup(backup, other, { force: true });
    expect(readFileSync(join(other.dataDir, 'secret.key'), 'utf8')).toBe(keyText(key));
  });

  it('of a data dir is kept when the backup holds none', async () => {
    const { db, store } = coffer.services;
    const backup = join(temp, 'no-key');
    await createBackup(db, store, backup);
    const config = { ...coffer.config, dataDir: join(temp, 'keeps-key') };
    mkdirSync(config.dataDir);
    const own = keyText(randomBytes(32));
    writeFileSync(join(config.dataDir, 'secret.key'), own);
    expect((await restoreBackup(backup, config, { force: false })).secretKey).toBe(false);
    expect(readFileSync(join(config.dataDir, 'secret.key'), 'utf8')).toBe(own);
  });
});
