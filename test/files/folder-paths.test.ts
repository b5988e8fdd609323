import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/infra/db.ts';
import { createFolderService } from '../../src/modules/folders/service.ts';
import { testDb } from '../support/backends.ts';

const SUFFIX = randomUUID().slice(0, 8);
const PROJECT = `proj_paths_${SUFFIX}`;

/** Statements run through `counted` since the last reset. */
let statements = 0;
let counted: Db;
beforeAll(async () => {
  const db = await testDb();
  await db.query('INSERT INTO organizations (id, name) VALUES ($1, $2)', [`org_paths_${SUFFIX}`, 'o']);
  await db.query(
    'INSERT INTO projects (id, organization_id, name, settings, bucket) VALUES ($1, $2, $3, $4, $5)',
    [PROJECT, `org_paths_${SUFFIX}`, 'p', '{}', `paths-${SUFFIX}`],
  );
  counted = {
    ...db,
    query: (sql, params) => {
      statements++;
      return db.query(sql, params);
    },
  };
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

  it("creates deep paths that share their prefixes from many requests at once, each taking the others' folders", async () => {
    const folders = createFolderService(counted);
    for (let round = 0; round < 5; round++) {
      // Paths r/0/1/…, r/1/…: every request creates some segments and meets others' inserts of the rest.
      const paths = Array.from({ length: 40 }, (_, i) =>
        [`deep${round}`, ...Array.from({ length: 6 }, (_, level) => String((i >> level) % 2))].join('/'),
      );
      const made = await Promise.all(paths.map((path) => folders.ensurePath(PROJECT, path)));
      expect(made.map((folder) => folder.path)).toEqual(paths);
      for (const [i, path] of paths.entries())
        expect((await folders.findByPath(PROJECT, path))?.id).toBe(made[i]!.id);
    }
  });
});

describe('S3 markers', () => {
  it('takes folders made before markers were kept, and those made on purpose, as markers', async () => {
    const folders = createFolderService(counted);
    await counted.query(
      'INSERT INTO folders (id, project_id, parent_id, name, path) VALUES ($1, $2, null, $3, $3)',
      [`fld_old_${SUFFIX}`, PROJECT, 'old'],
    );
    expect(await folders.markerAt(PROJECT, 'old')).toBeDefined();
    await folders.create(PROJECT, 'made', null);
    await folders.ensurePath(PROJECT, 'token/path');
    for (const path of ['made', 'token', 'token/path'])
      expect(await folders.markerAt(PROJECT, path), path).toBeDefined();
  });

  it('makes no markers of the folders a key implies; marking one leaves those above it implied', async () => {
    const folders = createFolderService(counted);
    await folders.ensurePath(PROJECT, 'k1/k2', { field: 'key', implied: true });
    expect(await folders.markerAt(PROJECT, 'k1/k2')).toBeUndefined();
    await folders.markPath(PROJECT, 'k1/k2');
    expect(await folders.markerAt(PROJECT, 'k1/k2')).toBeDefined();
    await folders.markPath(PROJECT, 'k3/k4');
    expect(await folders.markerAt(PROJECT, 'k3/k4')).toBeDefined();
    expect(await folders.markerAt(PROJECT, 'k3')).toBeUndefined();
  });

  it('unmarks a folder that holds something, and removes an empty one', async () => {
    const folders = createFolderService(counted);
    await folders.markPath(PROJECT, 'u1/u2');
    await folders.markPath(PROJECT, 'u1');
    await folders.unmarkPath(PROJECT, 'u1');
    expect(await folders.findByPath(PROJECT, 'u1')).toBeDefined();
    expect(await folders.markerAt(PROJECT, 'u1')).toBeUndefined();
    await folders.unmarkPath(PROJECT, 'u1/u2');
    expect(await folders.findByPath(PROJECT, 'u1/u2')).toBeUndefined();
    await folders.unmarkPath(PROJECT, 'nowhere');
  });
});
