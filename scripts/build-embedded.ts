/**
 * Makes the template of new embedded databases (src/infra/embedded-template.ts) for the installed
 * PGlite version and the current migrations, unless it is there already: a data directory created
 * and migrated aside, whose database folder is then renamed into place.
 *
 *   npm run build:embedded     (also run by npm install and before npm test)
 */
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { openPglite } from '../src/infra/db.ts';
import { TEMPLATE_DIR } from '../src/infra/embedded-template.ts';
import { migrate } from '../src/infra/migrate.ts';

if (existsSync(TEMPLATE_DIR)) {
  process.stdout.write(`embedded database template: ${TEMPLATE_DIR}\n`);
} else {
  mkdirSync(dirname(TEMPLATE_DIR), { recursive: true });
  const aside = mkdtempSync(`${TEMPLATE_DIR}.building-`);
  try {
    const db = await openPglite(aside);
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
    renameSync(join(aside, 'pglite'), TEMPLATE_DIR);
    process.stdout.write(`embedded database template written to ${TEMPLATE_DIR}\n`);
  } finally {
    rmSync(aside, { recursive: true, force: true });
  }
}
