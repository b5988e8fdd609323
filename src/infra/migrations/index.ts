/**
 * The migrations: the numbered SQL files beside this module, in order. Applying them is migrate.ts's
 * job; the embedded template is named after them too, so listing them needs no database.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Migration {
  name: string;
  sql: string;
}

export function loadMigrations(dir = import.meta.dirname): Migration[] {
  return readdirSync(dir)
    .filter((name) => /^\d{3}_[a-z0-9_]+\.sql$/.test(name))
    .sort()
    .map((name) => ({ name, sql: readFileSync(join(dir, name), 'utf8') }));
}
