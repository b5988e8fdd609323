import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadMigrations } from './migrate.ts';

/**
 * A new embedded database, initialized and migrated, made once per PGlite version and set of
 * migrations (`npm run build:embedded`, run by npm install and before the tests) and copied into a
 * new data directory in place of running initdb and every migration there. Those were nearly all of
 * a first start (about 3 of its 3.5 s on two cores) and left the process holding the memory they
 * grew it to; a copy of the folder takes a fraction of a second and no memory. Without it (an
 * install that skipped its scripts, a migration added since) a first start does both itself.
 */
const pgliteVersion: string = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.resolve('@electric-sql/pglite')), 'utf8'),
).version;

const migrationsDigest = createHash('sha256')
  .update(JSON.stringify(loadMigrations()))
  .digest('hex')
  .slice(0, 16);

/** The template's folder: the `pglite` folder of a data directory that was just created and migrated. */
export const TEMPLATE_DIR = join(
  import.meta.dirname,
  '../../node_modules/.cache/coffer',
  `pglite-${pgliteVersion}-${migrationsDigest}`,
);

/**
 * Copies the template into `path`, the database folder of a new data directory; false when there is
 * none. PG_VERSION, which tells a database folder from an empty one, is copied last: a copy cut short
 * by a crash has none, so the next start copies again over it.
 */
export function copyTemplate(path: string): boolean {
  const version = join(TEMPLATE_DIR, 'PG_VERSION');
  if (!existsSync(version)) return false;
  cpSync(TEMPLATE_DIR, path, { recursive: true, filter: (source) => source !== version });
  copyFileSync(version, join(path, 'PG_VERSION'));
  return true;
}
