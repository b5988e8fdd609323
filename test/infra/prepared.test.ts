import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/infra/db.ts';
import { testDb } from '../support/backends.ts';

/** Statements run prepared (parsed once, their plan kept) on both databases: what they answer does not change. */

let db: Db;
const table = `prepared_${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  db = await testDb();
  await db.exec(
    `CREATE TABLE ${table} (id text PRIMARY KEY, n int8 NOT NULL, doc jsonb, tags text[], at timestamptz)`,
  );
});

describe('a prepared statement', () => {
  it('answers the same values and types on every run, past the runs after which a generic plan is kept', async () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    for (let i = 0; i < 12; i++) {
      const [row] = await db.query(
        `INSERT INTO ${table} (id, n, doc, tags, at) VALUES ($1, $2, $3::jsonb, $4, $5) RETURNING *`,
        [`row${i}`, 2 ** 40 + i, JSON.stringify({ i, nested: [i] }), ['a', `t${i}`], at],
      );
      expect(row).toEqual({
        id: `row${i}`,
        n: 2 ** 40 + i,
        doc: { i, nested: [i] },
        tags: ['a', `t${i}`],
        at,
      });
      // No parameter, null parameters, and no row.
      expect(await db.query(`SELECT count(*) AS c FROM ${table} WHERE id LIKE 'row%'`)).toEqual([
        { c: i + 1 },
      ]);
      expect(await db.query(`SELECT id FROM ${table} WHERE doc IS NOT DISTINCT FROM $1`, [null])).toEqual([]);
    }
  });

  it('fails with the database error, and a transaction that meets one is rolled back whole', async () => {
    const insert = `INSERT INTO ${table} (id, n) VALUES ($1, $2)`;
    await db.query(insert, ['dup', 1]);
    await expect(db.query(insert, ['dup', 2])).rejects.toMatchObject({ code: '23505' });
    await expect(
      db.tx(async (q) => {
        await q.query(insert, ['in-tx', 1]);
        await q.query(insert, ['dup', 3]);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await db.query(`SELECT id FROM ${table} WHERE id IN ('dup', 'in-tx')`)).toEqual([{ id: 'dup' }]);
    // The statements work again at once, in and out of transactions.
    await db.tx((q) => q.query(insert, ['after', 1]));
    expect(await db.query(`SELECT n FROM ${table} WHERE id = $1`, ['after'])).toEqual([{ n: 1 }]);
  });

  it('is prepared anew when its table changes shape (a column added under SELECT *)', async () => {
    const select = `SELECT * FROM ${table} WHERE id = $1`;
    for (let i = 0; i < 8; i++) await db.query(select, ['after']);
    await db.exec(`ALTER TABLE ${table} ADD COLUMN extra text DEFAULT 'x'`);
    // On PostgreSQL each pooled connection that prepared it may meet the old plan once: every read still answers.
    for (let i = 0; i < 30; i++)
      expect(await db.query(select, ['after'])).toMatchObject([{ id: 'after', extra: 'x' }]);
  });
});
