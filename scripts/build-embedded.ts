/**
 * Makes the template of new embedded databases (src/infra/embedded-template.ts) for the installed
 * PGlite version and the current migrations, unless it is there already: a data directory created,
 * migrated and frozen aside, synced, and its database folder renamed into place. Templates of other
 * PGlite versions or migrations are removed.
 *
 *   npm run build:embedded     (also run by npm install and before npm test)
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { openPglite } from '../src/infra/db.ts';
import { syncTree, templateDir } from '../src/infra/embedded-template.ts';
import { migrate } from '../src/infra/migrate.ts';

const template = templateDir();
const cache = dirname(template);

if (existsSync(template)) {
  process.stdout.write(`embedded database template: ${template}\n`);
} else {
  mkdirSync(cache, { recursive: true });
  const aside = mkdtempSync(`${template}.building-`);
  try {
    const db = await openPglite(aside);
    try {
      await migrate(db);
      // Every row frozen: copies start with no transaction ids to wrap around from the template.
      await db.exec('VACUUM (FREEZE, ANALYZE)');
    } finally {
      await db.close();
    }
    await syncTree(join(aside, 'pglite'));
    try {
      renameSync(join(aside, 'pglite'), template);
    } catch (error) {
      // Another build (a second npm test, say) put its template in place first: as good as this one.
      if (!existsSync(template)) throw error;
    }
    process.stdout.write(`embedded database template written to ${template}\n`);
  } finally {
    rmSync(aside, { recursive: true, force: true });
  }
  for (const name of readdirSync(cache)) {
    const stale = name.startsWith('pglite-') && name !== basename(template) && !name.includes('.building-');
    if (stale) rmSync(join(cache, name), { recursive: true, force: true });
  }
}
