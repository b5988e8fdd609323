import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPglite } from '../../src/infra/db.ts';
import { vacuumChurned } from '../../src/infra/embedded-vacuum.ts';

let db: Db;
beforeAll(async () => {
  db = await openPglite(undefined);
  await db.exec(
    'CREATE TABLE churn (id int PRIMARY KEY, body text); CREATE TABLE quiet (id int PRIMARY KEY)',
  );
  await db.exec('INSERT INTO quiet SELECT generate_series(1, 10)');
});
afterAll(() => db.close());

const bytesOf = async (table: string) =>
  (await db.query<{ bytes: number }>('SELECT pg_relation_size($1::regclass) AS bytes', [table]))[0]!.bytes;

/** Inserts and deletes 2,000 rows of 100 bytes: a few hundred KiB of dead rows until a vacuum. */
const churn = () =>
  db.exec("INSERT INTO churn SELECT g, repeat('x', 100) FROM generate_series(1, 2000) g; DELETE FROM churn");

describe('embedded vacuum', () => {
  it('vacuums and analyzes a table that churned, then leaves it until it grows again', async () => {
    for (let round = 0; round < 5; round++) await churn();
    const before = await bytesOf('churn');
    expect(await vacuumChurned(db)).toEqual(['churn']);
    // Its size is recorded (what the next check compares with), and it is not due again until it grows.
    const pages = await db.query<{ pages: number }>(
      "SELECT relpages::int8 AS pages FROM pg_class WHERE relname = 'churn'",
    );
    expect(pages[0]!.pages * 8192).toBe(await bytesOf('churn'));
    expect(await vacuumChurned(db)).toEqual([]);
    // The dead rows are gone: the same churn again reuses their space instead of growing the table.
    for (let round = 0; round < 5; round++) {
      await churn();
      await vacuumChurned(db);
    }
    expect(await bytesOf('churn')).toBeLessThanOrEqual(before);
  });

  it('does not vacuum a small table that did not grow', async () => {
    expect(await vacuumChurned(db)).not.toContain('quiet');
  });
});
