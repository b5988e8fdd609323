import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPglite, type Queryable } from '../../src/infra/db.ts';
import { createEmbeddedVacuum } from '../../src/infra/embedded-vacuum.ts';
import { migrate } from '../../src/infra/migrate.ts';
import { findByKey } from '../../src/modules/files/key-repo.ts';

const PROJECT = 'proj_statistics';
const FILES = 3000;

let dir: string;
let db: Db;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-statistics-'));
  db = await openPglite(dir);
  await migrate(db);
  await db.exec(`INSERT INTO organizations (id, name) VALUES ('org_statistics', 'o');
    INSERT INTO projects (id, organization_id, name, settings, bucket)
      VALUES ('${PROJECT}', 'org_statistics', 'p', '{}', 'statistics');
    INSERT INTO files (id, project_id, status, filename, content_type, size_bytes, category, storage_key)
      SELECT 'file_' || lpad(g::text, 6, '0'), '${PROJECT}', 'ready', g || '.bin', 'application/octet-stream', 1,
        'other', 'k/' || g
      FROM generate_series(1, ${FILES}) g`);
});
afterAll(async () => {
  await db?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The plan of the statement findByKey runs for `key`. */
async function planOfKeyLookup(key: string): Promise<string> {
  let statement: { sql: string; params: unknown[] } | undefined;
  const capture: Queryable = {
    async query<T>(sql: string, params: unknown[] = []) {
      statement = { sql, params };
      return [] as T[];
    },
    exec: async () => {},
  };
  await findByKey(capture, PROJECT, key);
  const rows = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement!.sql}`, statement!.params);
  return rows.map((row) => row['QUERY PLAN']).join('\n');
}

describe('statistics of the embedded database', () => {
  it('the first vacuum check after a table fills analyzes it, and an S3 key is then read from its index', async () => {
    // A new database's tables are recorded empty (the template is analyzed before its first row): until
    // its first analyze the planner may read every file of a project for a key, which costs a scan
    // that grows with the project.
    const vacuumNext = createEmbeddedVacuum(db);
    const vacuumed: string[] = [];
    for (let table = await vacuumNext(); table !== undefined; table = await vacuumNext())
      vacuumed.push(table);
    expect(vacuumed).toContain('files');
    const plan = await planOfKeyLookup('5.bin');
    expect(plan).toMatch(/Index (Only )?Scan using files_s3_key/);
    expect(plan).not.toMatch(/Sort/);
    expect((await findByKey(db, PROJECT, '5.bin'))?.id).toBe('file_000005');
  });
});
