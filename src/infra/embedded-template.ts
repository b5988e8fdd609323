import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';

/**
 * A freshly initialized embedded database, made once per PGlite version (`npm run build:embedded`, run
 * by npm install) and copied into a new data directory in place of running initdb there. initdb is
 * most of a first start (about 3 of its 3.5 s on two cores) and leaves the process holding the memory
 * it grew to; copying the template takes a fraction of a second. Without the file (an install that
 * skipped its scripts, another PGlite version) a first start runs initdb as before.
 */
const pgliteVersion: string = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.resolve('@electric-sql/pglite')), 'utf8'),
).version;

export const TEMPLATE_PATH = join(
  import.meta.dirname,
  '../../node_modules/.cache/coffer',
  `pglite-${pgliteVersion}.tar.gz`,
);

/** The template, or undefined when none was made for this PGlite version. */
export function readTemplate(): Blob | undefined {
  try {
    return new Blob([readFileSync(TEMPLATE_PATH)], { type: 'application/gzip' });
  } catch {
    return undefined;
  }
}

/** Writes the template of a database `fresh` has just initialized (written aside, then renamed into place). */
export async function writeTemplate(fresh: PGlite): Promise<string> {
  const tarball = Buffer.from(await (await fresh.dumpDataDir('gzip')).arrayBuffer());
  mkdirSync(dirname(TEMPLATE_PATH), { recursive: true });
  const aside = `${TEMPLATE_PATH}.${process.pid}`;
  writeFileSync(aside, tarball);
  renameSync(aside, TEMPLATE_PATH);
  return TEMPLATE_PATH;
}
