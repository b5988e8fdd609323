/**
 * The embedded database alone: a bare Node.js process that opens the PGlite database of a data
 * directory, runs one query and idles, so that bench/startup.ts can read what PGlite by itself keeps
 * resident beside an idle Coffer server on the same database. Started by bench/helper-servers.ts
 * (startEmbeddedIdle); stops on SIGTERM.
 *
 * Environment: BENCH_DATA_DIR (a data directory no other process holds).
 */
import { openPglite } from '../src/infra/db.ts';

const dataDir = process.env.BENCH_DATA_DIR;
if (!dataDir) throw new Error('BENCH_DATA_DIR: the data directory to open is missing');
const db = await openPglite(dataDir);
await db.query('SELECT 1');
process.stdout.write('ready\n');
const idle = setInterval(() => {}, 60_000);
process.once('SIGTERM', () => {
  clearInterval(idle);
  void db.close();
});
