/**
 * Makes the template of new embedded databases (src/infra/embedded-template.ts) for the installed
 * PGlite version, unless it is there already.
 *
 *   npm run build:embedded     (also run by npm install and before npm test)
 */
import { existsSync } from 'node:fs';
import { buildEmbeddedTemplate } from '../src/infra/db.ts';
import { TEMPLATE_PATH } from '../src/infra/embedded-template.ts';

if (existsSync(TEMPLATE_PATH)) process.stdout.write(`embedded database template: ${TEMPLATE_PATH}\n`);
else process.stdout.write(`embedded database template written to ${await buildEmbeddedTemplate()}\n`);
