import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPglite } from '../../src/infra/db.ts';
import { migrate } from '../../src/infra/migrate.ts';
import { createFolderService } from '../../src/modules/folders/service.ts';

const PROJECT = 'proj_paths';

let dir: string;
let db: Db;
/** Statements run through `counted` since the last reset. */
let statements = 0;
let counted: Db;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-paths-'));
  db = await openPglite(dir);
  await migrate(db);
  await db.exec(`INSERT INTO organizations (id, name) VALUES ('org_paths', 'o');
    INSERT INTO projects (id, organization_id, name, settings, bucket)
      VALUES ('${PROJECT}', 'org_paths', 'p', '{}', 'paths')`);
  counted = {
    ...db,
    query: (sql, params) => {
      statements++;
      return db.query(sql, params);
    },
  };
});
afterAll(async () => {
  await db?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('ensurePath', () => {
  it('finds a folder that exists with one statement, however deep its path', async () => {
    const folders = createFolderService(counted);
    const made = await folders.ensurePath(PROJECT, 'a/b/c/d');
    statements = 0;
    expect(await folders.ensurePath(PROJECT, 'a/b/c/d')).toEqual(made);
    expect(statements).toBe(1);
    // Slashes are separators only: the same folder however they are repeated.
    expect((await folders.ensurePath(PROJECT, '/a//b/c/d/')).id).toBe(made.id);
  });

  it('creates the missing segments under the ones that exist', async () => {
    const folders = createFolderService(counted);
    const parent = await folders.ensurePath(PROJECT, 'x/y');
    const child = await folders.ensurePath(PROJECT, 'x/y/z');
    expect(child).toMatchObject({ parent_id: parent.id, path: 'x/y/z', name: 'z' });
  });

  it('follows a move: the old path is made anew, the new one is the moved folder', async () => {
    const folders = createFolderService(counted);
    const moved = await folders.ensurePath(PROJECT, 'm/n');
    const target = await folders.ensurePath(PROJECT, 'o');
    await folders.update(PROJECT, moved.id, { parent_id: target.id });
    expect((await folders.ensurePath(PROJECT, 'o/n')).id).toBe(moved.id);
    expect((await folders.ensurePath(PROJECT, 'm/n')).id).not.toBe(moved.id);
  });
});
