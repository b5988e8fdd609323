import { copyFile, mkdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Config } from '../../config.ts';
import { isLockFile, lockEmbeddedDatabase, openPglite } from '../../infra/db.ts';
import {
  readSecretKeyFile,
  SECRET_KEY_FILE,
  SecretKeyFileError,
  secretKeyPath,
  writeSecretKeyFile,
} from '../../infra/secret-key.ts';
import { entries } from '../../infra/storage/local/files.ts';
import { BackupError, DATABASE_FILE, type Manifest, readManifest, verifyBackup } from './manifest.ts';
import { probeRestored } from './repo.ts';

export interface RestoreSummary {
  dataDir: string;
  files: number;
  objects: number;
  /** Whether the backup held the server key, now the data dir's secret.key. */
  secretKey: boolean;
}

/** The server key a backup holds, read after the backup was verified. */
async function backupKey(backupDir: string, manifest: Manifest): Promise<Buffer | undefined> {
  if (!manifest.files.some((file) => file.path === SECRET_KEY_FILE)) return undefined;
  try {
    return await readSecretKeyFile(join(backupDir, SECRET_KEY_FILE));
  } catch (error) {
    if (error instanceof SecretKeyFileError) throw new BackupError(error.message);
    throw error;
  }
}

/** Whether the data dir holds a server key other than `key` (the same one changes nothing). */
async function holdsOtherKey(dataDir: string, key: Buffer | undefined): Promise<boolean> {
  if (!key) return false;
  const present = await readSecretKeyFile(secretKeyPath(dataDir)).catch((error: unknown) => {
    if (error instanceof SecretKeyFileError) return Buffer.alloc(0); // unreadable: replaced as any other
    throw error;
  });
  return present !== undefined && !present.equals(key);
}

/** What the data dir holds already: database files and objects; none in a fresh one. */
async function contentOf(dataDir: string): Promise<string[]> {
  const database = (await entries(join(dataDir, 'pglite'))).filter((name) => !isLockFile(name));
  const objects = await entries(join(dataDir, 'objects'));
  return [
    ...database.map((name) => join(dataDir, 'pglite', name)),
    ...objects.map((name) => join(dataDir, 'objects', name)),
  ];
}

function checkStorage(manifest: Manifest, config: Pick<Config, 'storage'>): void {
  if (manifest.storage === config.storage.kind) return;
  throw new BackupError(
    manifest.storage === 'local'
      ? `The backup holds local objects, but COFFER_STORAGE is ${config.storage.kind}: restore with COFFER_STORAGE=local`
      : 'The backup holds the database alone (its objects are in S3): restore with the same COFFER_STORAGE=s3 settings',
  );
}

/**
 * Restores the backup in `backupDir` into the data dir of `config`: verifies every file against the
 * manifest before anything is written, takes the embedded database (refused while a server holds
 * it), then copies the objects, puts back the server key when the backup holds it, and loads the
 * database last. The data dir must hold no database, objects or other server key, unless `force`
 * replaces them.
 */
export async function restoreBackup(
  backupDir: string,
  config: Pick<Config, 'dataDir' | 'databaseUrl' | 'storage'>,
  options: { force: boolean },
): Promise<RestoreSummary> {
  if (config.databaseUrl) {
    throw new BackupError(
      'coffer restore restores the embedded database; PostgreSQL is restored with pg_restore or PITR (see Backups in the README)',
    );
  }
  const manifest = await readManifest(backupDir);
  checkStorage(manifest, config);
  await verifyBackup(backupDir, manifest);
  const key = await backupKey(backupDir, manifest);
  const unlock = lockEmbeddedDatabase(config.dataDir);
  try {
    const present = await contentOf(config.dataDir);
    if (present.length > 0 && !options.force) {
      throw new BackupError(
        `${config.dataDir} already holds a database or objects: restore into a new data dir, or pass --force to replace them`,
      );
    }
    // A different server key in the data dir is replaced only with --force, as a database is.
    if (!options.force && (await holdsOtherKey(config.dataDir, key))) {
      throw new BackupError(
        `${config.dataDir} holds another server key (${SECRET_KEY_FILE}): restore into a new data dir, or pass --force to replace it`,
      );
    }
    for (const path of present) await rm(path, { recursive: true, force: true });
    // Objects first: until the database is loaded, a server started on the folder would find none.
    for (const file of manifest.files) {
      if (file.path === DATABASE_FILE || file.path === SECRET_KEY_FILE) continue;
      const to = join(config.dataDir, ...file.path.split('/'));
      await mkdir(dirname(to), { recursive: true });
      await copyFile(join(backupDir, ...file.path.split('/')), to);
    }
    // Replaced whole (never removed first): the data dir always holds one key or the other.
    if (key) await writeSecretKeyFile(secretKeyPath(config.dataDir), key, true);
    const snapshot = new File([await readFile(join(backupDir, DATABASE_FILE))], DATABASE_FILE, {
      type: 'application/x-gzip',
    });
    const db = await openPglite(config.dataDir, { load: snapshot, locked: true });
    try {
      await probeRestored(db);
    } finally {
      await db.close();
    }
    return {
      dataDir: config.dataDir,
      files: manifest.files.length,
      objects: manifest.objects,
      secretKey: key !== undefined,
    };
  } finally {
    unlock();
  }
}
