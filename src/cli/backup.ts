import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { DatabaseInUseError, type Db, openPglite } from '../infra/db.ts';
import { createObjectStore } from '../infra/storage/index.ts';
import { type BackupSummary, createBackup, NOT_EMBEDDED } from '../modules/backups/backup.ts';
import { askServer } from '../modules/backups/control.ts';
import { BackupError } from '../modules/backups/manifest.ts';
import { restoreBackup } from '../modules/backups/restore.ts';

export const BACKUP_USAGE = `Usage: coffer backup DIR
       coffer restore DIR [--force]

backup    copies the embedded database and the objects it refers to into DIR (new or empty), with a
          manifest of checksums; while coffer serve or coffer worker runs on the data dir, that
          process makes the copy without stopping
restore   verifies the backup in DIR against its manifest, then restores it into COFFER_DATA_DIR,
          which must hold no database or objects (--force replaces them); refused while a Coffer
          process runs on it
`;

const MiB = 1024 * 1024;
const size = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

function print(text: string): void {
  process.stdout.write(`${text}\n`);
}

/** Backs up in this process when no other holds the database, or asks the one that does. */
async function backup(dir: string, signal: AbortSignal): Promise<BackupSummary> {
  const config = loadConfig();
  if (config.databaseUrl) throw new BackupError(NOT_EMBEDDED);
  if (!existsSync(resolve(config.dataDir, 'pglite', 'PG_VERSION'))) {
    throw new BackupError(`${config.dataDir} holds no embedded database (COFFER_DATA_DIR)`);
  }
  let db: Db;
  try {
    db = await openPglite(config.dataDir);
  } catch (error) {
    if (error instanceof DatabaseInUseError)
      return askServer(config.dataDir, { command: 'backup', dir }, signal);
    throw error;
  }
  // Only read: the URL settings of this store are never used.
  const store = await createObjectStore(config.storage, {
    dataDir: config.dataDir,
    publicUrl: config.publicUrl,
    urlSigningSecret: 'unused',
  });
  try {
    return await createBackup(db, store, dir, signal);
  } finally {
    await store.close();
    await db.close();
  }
}

/** The folder argument and --force; undefined on a usage error. */
function parse(command: 'backup' | 'restore', args: string[]): { dir: string; force: boolean } | undefined {
  try {
    const { values, positionals } = parseArgs({
      args,
      options: { force: { type: 'boolean', default: false } },
      allowPositionals: true,
    });
    if (positionals.length !== 1 || (command === 'backup' && values.force)) return undefined;
    return { dir: resolve(positionals[0]!), force: values.force };
  } catch {
    return undefined;
  }
}

/** `coffer backup DIR` and `coffer restore DIR [--force]`; answers the exit code (2 on usage). */
export async function runBackupCommand(command: 'backup' | 'restore', args: string[]): Promise<number> {
  const parsed = parse(command, args);
  if (!parsed) {
    process.stderr.write(BACKUP_USAGE);
    return 2;
  }
  // Ctrl-C stops a backup, which then removes what it wrote.
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
  try {
    if (command === 'backup') {
      const done = await backup(parsed.dir, stop.signal);
      const objects =
        done.storage === 's3'
          ? 'no objects (they are in S3)'
          : `${done.objects} objects (${size(done.objectBytes)})`;
      print(`Backed up the database (${size(done.databaseBytes)}) and ${objects} into ${done.dir}`);
    } else {
      const done = await restoreBackup(parsed.dir, loadConfig(), { force: parsed.force });
      print(`Restored the database and ${done.objects} objects from ${parsed.dir} into ${done.dataDir}`);
    }
    return 0;
  } catch (error) {
    if (stop.signal.aborted && command === 'backup') {
      process.stderr.write(`coffer backup: stopped; ${parsed.dir} holds no backup\n`);
      return 130;
    }
    if (error instanceof BackupError || error instanceof DatabaseInUseError) {
      process.stderr.write(`coffer ${command}: ${error.message}\n`);
      return 1;
    }
    throw error;
  } finally {
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
}
