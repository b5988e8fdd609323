import { createHash } from 'node:crypto';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { copyFile, open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { loadMigrations } from './migrations/index.ts';

/**
 * A new embedded database, initialized and migrated, made once per PGlite version and set of
 * migrations (`npm run build:embedded`, run by npm install and before the tests) and copied into a
 * new data directory in place of running initdb and every migration there: those were nearly all of
 * a first start, and left the process holding the memory they grew it to. Without it (an install
 * that skipped its scripts, a migration added since) a first start does both itself.
 */
let dir: string | undefined;

/** The template's folder: the database folder of a data directory that was just created and migrated. */
export function templateDir(): string {
  if (dir) return dir;
  const pglite = JSON.parse(
    readFileSync(new URL('../package.json', import.meta.resolve('@electric-sql/pglite')), 'utf8'),
  ) as { version: string };
  const migrations = createHash('sha256').update(JSON.stringify(loadMigrations())).digest('hex').slice(0, 16);
  dir = join(
    import.meta.dirname,
    '../../node_modules/.cache/coffer',
    `pglite-${pglite.version}-${migrations}`,
  );
  return dir;
}

/** fsync of one file or folder. */
async function syncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Syncs every file and folder under `root` (a few at a time), folders after their entries. */
export async function syncTree(root: string): Promise<void> {
  const entries = readdirSync(root, { recursive: true, withFileTypes: true });
  const paths = (files: boolean) =>
    entries
      .filter((entry) => (files ? entry.isFile() : entry.isDirectory()))
      .map((entry) => join(entry.parentPath, entry.name));
  for (const batch of [paths(true), paths(false)]) {
    for (let i = 0; i < batch.length; i += 32) await Promise.all(batch.slice(i, i + 32).map(syncPath));
  }
  await syncPath(root);
}

/**
 * Makes `path`, the database folder of a new data directory, a copy of the template; false when there
 * is none. PG_VERSION, which tells a database folder from an empty one, is written last, once
 * everything else is on disk, and whole (renamed into place): a copy cut short by a crash or a power
 * loss has none, and the next start clears it (all but the data directory's lock, `isLockFile`) and
 * copies again.
 */
export async function copyTemplate(path: string, isLockFile: (name: string) => boolean): Promise<boolean> {
  for (const name of readdirSync(path)) {
    if (!isLockFile(name)) rmSync(join(path, name), { recursive: true, force: true });
  }
  const template = templateDir();
  const version = join(template, 'PG_VERSION');
  if (!existsSync(version)) return false;
  cpSync(template, path, { recursive: true, filter: (source) => source !== version });
  await syncTree(path);
  const aside = join(path, 'PG_VERSION.copying');
  await copyFile(version, aside);
  await syncPath(aside);
  await rename(aside, join(path, 'PG_VERSION'));
  await syncPath(path);
  return true;
}
