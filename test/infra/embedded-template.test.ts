import { cpSync, existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPglite } from '../../src/infra/db.ts';
import { templateDir } from '../../src/infra/embedded-template.ts';
import { migrate } from '../../src/infra/migrate.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-template-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** initdb gives every cluster an identifier of its own; copies of one template share it. */
async function systemIdentifier(dataDir: string): Promise<string> {
  const db = await openPglite(dataDir);
  try {
    const [row] = await db.query<{ id: string }>(
      'SELECT system_identifier::text AS id FROM pg_control_system()',
    );
    return row!.id;
  } finally {
    await db.close();
  }
}

/** The migrations a database opened on `dataDir` still lacks. */
async function pendingMigrations(dataDir: string): Promise<string[]> {
  const db = await openPglite(dataDir);
  try {
    return await migrate(db);
  } finally {
    await db.close();
  }
}

describe('the embedded template', () => {
  it('is made before the tests (npm test runs npm run build:embedded)', () => {
    expect(existsSync(templateDir())).toBe(true);
  });

  it('is what new data directories start from, every migration applied', async () => {
    const first = await systemIdentifier(join(dir, 'a'));
    expect(await systemIdentifier(join(dir, 'b'))).toBe(first);
    expect(await pendingMigrations(join(dir, 'c'))).toEqual([]);
  });

  it('is copied again over a copy cut short (no PG_VERSION yet)', async () => {
    const path = join(dir, 'cut', 'pglite');
    cpSync(join(templateDir(), 'global'), join(path, 'global'), { recursive: true });
    expect(await pendingMigrations(join(dir, 'cut'))).toEqual([]);
  });

  it('leaves a database that keeps what is written to it', async () => {
    const dataDir = join(dir, 'kept');
    const db = await openPglite(dataDir);
    await db.exec("CREATE TABLE notes (body text); INSERT INTO notes VALUES ('kept')");
    await db.close();
    const reopened = await openPglite(dataDir);
    try {
      expect(await reopened.query('SELECT body FROM notes')).toEqual([{ body: 'kept' }]);
    } finally {
      await reopened.close();
    }
  });
});
