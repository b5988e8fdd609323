import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { DatabaseInUseError, type Db, openPglite } from '../infra/db.ts';
import { readSecretKeyFile, SecretKeyFileError, secretKeyPath } from '../infra/secret-key.ts';
import { createObjectStore } from '../infra/storage/index.ts';
import { type BackupSummary, createBackup, NOT_EMBEDDED } from '../modules/backups/backup.ts';
import { askServer } from '../modules/backups/control.ts';
import { BackupError } from '../modules/backups/manifest.ts';
import { restoreBackup } from '../modules/backups/restore.ts';

export const BACKUP_USAGE = `Usage: coffer backup DIR [--with-secret-key]
       coffer restore DIR [--force]

backup    copies the embedded database and the objects it refers to into DIR (new or empty), with a
          manifest of checksums; while coffer serve or coffer worker runs on the data dir, that
          process makes the copy without stopping. --with-secret-key adds the server key
          (secret.key), without which the S3 credentials in the database cannot be used: keep such
          a backup as secret as the key
restore   verifies the backup in DIR against its manifest, then restores it into COFFER_DATA_DIR,
          which must hold no database or objects (--force replaces them), with the server key when
          the backup holds it; refused while a Coffer process runs on it
`;

const MiB = 1024 * 1024;
const size = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

function print(text: string): void {
  process.stdout.write(`${text}\n`);
}

/** The server key this data dir runs with: COFFER_SECRET_KEY, else its secret.key. */
async function serverKey(config: ReturnType<typeof loadConfig>): Promise<Buffer> {
  if (config.secretKey) return config.secretKey;
  let key: Buffer | undefined;
  try {
    key = await readSecretKeyFile(secretKeyPath(config.dataDir));
  } catch (error) {
    if (error instanceof SecretKeyFileError) throw new BackupError(error.message);
    throw error;
  }
  if (!key) throw new BackupError(`${config.dataDir} holds no secret.key and COFFER_SECRET_KEY is not set`);
  return key;
}

/** Backs up in this process when no other holds the database, or asks the one that does. */
async function backup(dir: string, withSecretKey: boolean, signal: AbortSignal): Promise<BackupSummary> {
  const config = loadConfig();
  if (config.databaseUrl) throw new BackupError(NOT_EMBEDDED);
  if (!existsSync(resolve(config.dataDir, 'pglite', 'PG_VERSION'))) {
    throw new BackupError(`${config.dataDir} holds no embedded database (COFFER_DATA_DIR)`);
  }
  let db: Db;
  try {
    db = await openPglite(config.dataDir);
  } catch (error) {
    // The process holding the database includes the key it runs with.
    if (error instanceof DatabaseInUseError)
      return askServer(config.dataDir, { command: 'backup', dir, withSecretKey }, signal);
    throw error;
  }
  // Only read: the URL settings of this store are never used.
  const store = await createObjectStore(config.storage, {
    dataDir: config.dataDir,
    publicUrl: config.publicUrl,
    urlSigningSecret: 'unused',
  });
  try {
    const secretKey = withSecretKey ? await serverKey(config) : undefined;
    return await createBackup(db, store, dir, signal, { secretKey });
  } finally {
    await store.close();
    await db.close();
  }
}

/** The folder argument, --force (restore) and --with-secret-key (backup); undefined on a usage error. */
function parse(
  command: 'backup' | 'restore',
  args: string[],
): { dir: string; force: boolean; withSecretKey: boolean } | undefined {
  try {
    const { values, positionals } = parseArgs({
      args,
      options: {
        force: { type: 'boolean', default: false },
        'with-secret-key': { type: 'boolean', default: false },
      },
      allowPositionals: true,
    });
    const misplaced = command === 'backup' ? values.force : values['with-secret-key'];
    if (positionals.length !== 1 || misplaced) return undefined;
    return { dir: resolve(positionals[0]!), force: values.force, withSecretKey: values['with-secret-key'] };
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
      const done = await backup(parsed.dir, parsed.withSecretKey, stop.signal);
      const objects =
        done.storage === 's3'
          ? 'no objects (they are in S3)'
          : `${done.objects} objects (${size(done.objectBytes)})`;
      print(`Backed up the database (${size(done.databaseBytes)}) and ${objects} into ${done.dir}`);
      print(
        done.secretKey
          ? 'The backup holds the server key (secret.key): keep it as secret as the key itself.'
          : 'The server key is not in the backup (--with-secret-key adds it): keep it apart, the S3 credentials need it.',
      );
    } else {
      const done = await restoreBackup(parsed.dir, loadConfig(), { force: parsed.force });
      print(`Restored the database and ${done.objects} objects from ${parsed.dir} into ${done.dataDir}`);
      if (done.secretKey) print('Restored the server key (secret.key).');
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
