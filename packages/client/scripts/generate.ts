/**
 * Writes src/schema.d.ts from Coffer's OpenAPI document, built in this process (an in-memory
 * embedded database, objects in a temporary directory): no server to start, nothing to configure.
 *
 *   npm run generate -w @coffer/client
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { buildApp } from '../../../src/app.ts';
import { loadConfig } from '../../../src/config.ts';
import { openPglite } from '../../../src/infra/db.ts';
import { openRuntime } from '../../../src/runtime.ts';
import { renderTypes } from './openapi-types.ts';

export const SCHEMA_FILE = new URL('../src/schema.d.ts', import.meta.url);

/** The OpenAPI document that a Coffer server serves at /openapi.json. */
export async function buildOpenApiDocument(): Promise<object> {
  const dataDir = mkdtempSync(join(tmpdir(), 'coffer-openapi-'));
  const config = loadConfig({
    COFFER_DATA_DIR: dataDir,
    COFFER_ADMIN_KEY: `coffer_admin_${'g'.repeat(43)}`,
    COFFER_LOG_LEVEL: 'silent',
  });
  const db = await openPglite(undefined);
  const runtime = await openRuntime(config, { db, logger: pino({ level: 'silent' }) });
  try {
    const app = await buildApp({ config, services: runtime.services });
    try {
      await app.ready();
      return app.swagger() as object;
    } finally {
      await app.close();
    }
  } finally {
    await runtime.close();
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  writeFileSync(SCHEMA_FILE, await renderTypes(await buildOpenApiDocument()));
  process.stdout.write(`wrote ${SCHEMA_FILE.pathname}\n`);
}
