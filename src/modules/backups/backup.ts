import { createReadStream } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { Db } from '../../infra/db.ts';
import { SECRET_KEY_FILE } from '../../infra/secret-key.ts';
import { isLocalStore } from '../../infra/storage/local/store.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import {
  type BackupEntry,
  BackupError,
  DATABASE_FILE,
  newManifest,
  OBJECTS_FOLDER,
  writeHashed,
  writeManifest,
} from './manifest.ts';
import { referencedKeys } from './repo.ts';

export const NOT_EMBEDDED =
  'coffer backup copies the embedded database; PostgreSQL is backed up with pg_dump or PITR, S3 with bucket versioning (see Backups in the README)';

export interface BackupSummary {
  dir: string;
  storage: 'local' | 's3';
  databaseBytes: number;
  objects: number;
  objectBytes: number;
  /** Whether the server key is in the backup (asked for with --with-secret-key). */
  secretKey: boolean;
}

export interface BackupOptions {
  /** The server key, to be included (as secret.key, mode 0600); left out when absent. */
  secretKey?: Buffer;
}

/** Makes `dir` the backup's own: created when missing, refused when it holds anything. */
async function claimFolder(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  if ((await readdir(dir)).length > 0) {
    throw new BackupError(`${dir} is not empty: back up into a new or empty folder`);
  }
}

/**
 * Writes a backup of the embedded database and of the objects it refers to into `dir` (new or
 * empty), in the process that holds the database, while it serves.
 *
 * Consistent without stopping anything: deletions of objects wait from before the database snapshot
 * until every object is copied (the local store's delete hold), and objects never change once stored,
 * so each object the snapshot refers to is copied as it was then. Objects stored after the snapshot
 * are not copied, as the snapshot does not know them; uploads in progress (parts, unconfirmed PUTs
 * not yet stored) are not in a backup: after a restore they fail as abandoned uploads do.
 */
export async function createBackup(
  db: Db,
  store: ObjectStore,
  dir: string,
  signal?: AbortSignal,
  options: BackupOptions = {},
): Promise<BackupSummary> {
  if (!db.snapshot) throw new BackupError(NOT_EMBEDDED);
  await claimFolder(dir);
  const release = isLocalStore(store) ? store.holdDeletes() : () => {};
  try {
    const database = await db.snapshot((tarball) => writeHashed(tarball, join(dir, DATABASE_FILE)));
    const files: BackupEntry[] = [{ path: DATABASE_FILE, ...database }];
    let objectBytes = 0;
    if (isLocalStore(store)) {
      for (const key of await referencedKeys(db)) {
        for (const path of await store.objectFiles(key)) {
          signal?.throwIfAborted();
          const parts = path.split('/');
          const copy = await writeHashed(
            createReadStream(join(store.dir, ...parts)),
            join(dir, OBJECTS_FOLDER, ...parts),
          );
          files.push({ path: `${OBJECTS_FOLDER}/${path}`, ...copy });
          objectBytes += copy.size;
        }
      }
    }
    if (options.secretKey) {
      // In the form of the data dir's own key file, so that a restore puts it back as it was.
      const text = Readable.from([`${options.secretKey.toString('base64')}\n`]);
      files.push({ path: SECRET_KEY_FILE, ...(await writeHashed(text, join(dir, SECRET_KEY_FILE), 0o600)) });
    }
    const manifest = newManifest(store.kind, files);
    await writeManifest(dir, manifest);
    return {
      dir,
      storage: store.kind,
      databaseBytes: database.size,
      objects: manifest.objects,
      objectBytes,
      secretKey: options.secretKey !== undefined,
    };
  } catch (error) {
    // Everything in the folder is this backup's (it was empty): an unfinished backup leaves nothing.
    for (const name of await readdir(dir).catch(() => [])) {
      await rm(join(dir, name), { recursive: true, force: true });
    }
    throw error;
  } finally {
    release();
  }
}
