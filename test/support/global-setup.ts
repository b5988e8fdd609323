import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    runId: string;
  }
}

/** A run id for schema and key-prefix names, so concurrent and repeated runs never share data. */
export default function setup(project: TestProject) {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  project.provide('runId', runId);
  return async () => {
    const url = process.env.COFFER_TEST_DATABASE_URL;
    if (!url) return;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ nspname: string }>(
        `SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`,
        [`coffer_t_${runId}_%`],
      );
      for (const { nspname } of rows) await client.query(`DROP SCHEMA "${nspname}" CASCADE`);
    } finally {
      await client.end();
    }
  };
}
