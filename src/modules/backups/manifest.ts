import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SECRET_KEY_FILE } from '../../infra/secret-key.ts';

/**
 * A backup is a folder:
 *   database.tar.gz   the embedded database (a snapshot of its folder, see Db.snapshot)
 *   objects/…         the local store's files of every object the database refers to, laid out as in
 *                     $COFFER_DATA_DIR/objects (none when the objects live in S3)
 *   secret.key        the server key, only when asked for (--with-secret-key): whoever holds it can
 *                     open the S3 secrets stored in the database, so it is left out by default
 *   manifest.json     written last: what the backup holds, with the size and SHA-256 of every file
 */

export const DATABASE_FILE = 'database.tar.gz';
export const OBJECTS_FOLDER = 'objects';
export const MANIFEST_FILE = 'manifest.json';
const FORMAT = 'coffer-backup';
const VERSION = 1;

/** What a backup or a restore cannot do, said so that the operator knows what to change. */
export class BackupError extends Error {}

export interface BackupEntry {
  /** Relative to the backup folder, with forward slashes. */
  path: string;
  size: number;
  sha256: string;
}

export interface Manifest {
  format: typeof FORMAT;
  version: typeof VERSION;
  created_at: string;
  /** Where the objects were: `s3` backups hold the database alone. */
  storage: 'local' | 's3';
  objects: number;
  files: BackupEntry[];
}

/** Streams `source` into the new file `to` (its folders made, of `mode`), returning its size and SHA-256. */
export async function writeHashed(
  source: Readable,
  to: string,
  mode = 0o666,
): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  await mkdir(dirname(to), { recursive: true });
  await pipeline(
    source,
    new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        size += chunk.length;
        done(null, chunk);
      },
    }),
    createWriteStream(to, { flags: 'wx', mode }),
  );
  return { size, sha256: hash.digest('hex') };
}

/** The size and SHA-256 of the file at `path`. */
export async function hashFile(path: string): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(path)) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, sha256: hash.digest('hex') };
}

export function newManifest(storage: Manifest['storage'], files: BackupEntry[]): Manifest {
  return {
    format: FORMAT,
    version: VERSION,
    created_at: new Date().toISOString(),
    storage,
    // One sidecar per object.
    objects: files.filter((file) => file.path.endsWith('.meta.json')).length,
    files,
  };
}

/** Writes the manifest last and atomically: a folder without one is no backup (an unfinished one). */
export async function writeManifest(dir: string, manifest: Manifest): Promise<void> {
  const tmp = join(dir, `.${MANIFEST_FILE}.tmp`);
  await writeFile(tmp, `${JSON.stringify(manifest, null, 2)}\n`, { flush: true });
  await rename(tmp, join(dir, MANIFEST_FILE));
}

/** Whether `path` (from a manifest) names a file a backup may hold: the database, the key or a file under objects/. */
function isBackupPath(path: unknown): path is string {
  if (typeof path !== 'string' || path.includes('\\')) return false;
  if (path.split('/').some((part) => part === '' || part === '.' || part === '..')) return false;
  return path === DATABASE_FILE || path === SECRET_KEY_FILE || path.startsWith(`${OBJECTS_FOLDER}/`);
}

/** Reads the manifest of the backup in `dir`; BackupError when there is none or it is not one. */
export async function readManifest(dir: string): Promise<Manifest> {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, MANIFEST_FILE), 'utf8')) as Manifest;
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new BackupError(
      missing
        ? `${dir} holds no ${MANIFEST_FILE}: it is not a Coffer backup, or one that did not finish`
        : `${join(dir, MANIFEST_FILE)} cannot be read: ${(error as Error).message}`,
    );
  }
  const valid =
    manifest?.format === FORMAT &&
    (manifest.storage === 'local' || manifest.storage === 's3') &&
    Array.isArray(manifest.files) &&
    manifest.files.some((file) => file?.path === DATABASE_FILE) &&
    manifest.files.every(
      (file) =>
        isBackupPath(file?.path) &&
        Number.isSafeInteger(file.size) &&
        typeof file.sha256 === 'string' &&
        /^[0-9a-f]{64}$/.test(file.sha256),
    );
  if (!valid) throw new BackupError(`${join(dir, MANIFEST_FILE)} is not a Coffer backup manifest`);
  if (manifest.version !== VERSION) {
    throw new BackupError(
      `The backup is of format version ${manifest.version}; this Coffer reads version ${VERSION}`,
    );
  }
  return manifest;
}

/** Checks every file of the backup against its size and SHA-256; BackupError naming the first that differs. */
export async function verifyBackup(dir: string, manifest: Manifest): Promise<void> {
  for (const file of manifest.files) {
    const actual = await hashFile(join(dir, ...file.path.split('/'))).catch(
      (error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT')
          throw new BackupError(`The backup is incomplete: ${file.path} is missing`);
        throw error;
      },
    );
    if (actual.size !== file.size || actual.sha256 !== file.sha256) {
      throw new BackupError(
        `The backup is damaged: ${file.path} does not match its checksum in the manifest`,
      );
    }
  }
}

/** A readable of the bytes of `blob`. */
export const blobStream = (blob: Blob): Readable => Readable.fromWeb(blob.stream() as never);
