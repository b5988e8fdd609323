import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPglite } from '../../src/infra/db.ts';
import { createEmbeddedVacuum } from '../../src/infra/embedded-vacuum.ts';

let db: Db;
let clock = 0;
let vacuumNext: () => Promise<string | undefined>;
beforeAll(async () => {
  db = await openPglite(undefined);
  await db.exec(
    'CREATE TABLE churn (id int PRIMARY KEY, body text); CREATE TABLE "Quiet table" (id int PRIMARY KEY)',
  );
  await db.exec('INSERT INTO "Quiet table" SELECT generate_series(1, 10)');
  vacuumNext = createEmbeddedVacuum(db, () => clock);
});
afterAll(() => db.close());

const bytesOf = async (table: string) =>
  (await db.query<{ bytes: number }>('SELECT pg_relation_size($1::regclass) AS bytes', [table]))[0]!.bytes;

/** Inserts and deletes 2,000 rows of 100 bytes: a few hundred KiB of dead rows until a vacuum. */
const churn = () =>
  db.exec("INSERT INTO churn SELECT g, repeat('x', 100) FROM generate_series(1, 2000) g; DELETE FROM churn");

/** Every table vacuumed by the calls until none is due. */
async function vacuumAll(): Promise<string[]> {
  const vacuumed: string[] = [];
  for (let table = await vacuumNext(); table !== undefined; table = await vacuumNext()) vacuumed.push(table);
  return vacuumed;
}

describe('embedded vacuum', () => {
  it('vacuums and analyzes a table that churned, then leaves it until it grows again', async () => {
    for (let round = 0; round < 5; round++) await churn();
    const before = await bytesOf('churn');
    expect(await vacuumAll()).toEqual(['churn']);
    // Its size is recorded (what the next check compares with), and it is not due again until it grows.
    const pages = await db.query<{ pages: number }>(
      "SELECT relpages::int8 AS pages FROM pg_class WHERE relname = 'churn'",
    );
    expect(pages[0]!.pages * 8192).toBe(await bytesOf('churn'));
    clock += 60_000;
    expect(await vacuumAll()).toEqual([]);
    // The dead rows are gone: the same churn again reuses their space instead of growing the table.
    for (let round = 0; round < 5; round++) {
      await churn();
      clock += 60_000;
      await vacuumAll();
    }
    expect(await bytesOf('churn')).toBeLessThanOrEqual(before);
  });

  it('does not vacuum a table again within a minute, however it grew', async () => {
    for (let round = 0; round < 5; round++) await churn();
    clock += 60_000;
    expect(await vacuumAll()).toEqual(['churn']);
    for (let round = 0; round < 5; round++) await churn();
    expect(await vacuumAll()).toEqual([]);
    clock += 60_000;
    expect(await vacuumAll()).toEqual(['churn']);
  });

  it('vacuums every table once a day, whatever its name', async () => {
    clock += 86_400_000;
    expect((await vacuumAll()).sort()).toEqual(['Quiet table', 'churn']);
    expect(await vacuumAll()).toEqual([]);
  });
});
