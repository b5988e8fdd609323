import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { KEY_BYTES, KEY_FORMAT, parseKey } from '../lib/encryption.ts';

/**
 * The server key of an embedded deployment that does not set COFFER_SECRET_KEY: a file in the data
 * directory, made on the first start and read on every later one. It holds the key in base64 (the
 * form COFFER_SECRET_KEY takes), readable by the owner only.
 */
export const SECRET_KEY_FILE = 'secret.key';

export const secretKeyPath = (dataDir: string) => join(dataDir, SECRET_KEY_FILE);

/** A key file that exists but holds no key: named, so that the operator can repair or remove it. */
export class SecretKeyFileError extends Error {}

/** The key in the file at `path`; undefined when there is no file. */
export async function readSecretKeyFile(path: string): Promise<Buffer | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const key = parseKey(text);
  if (!key) throw new SecretKeyFileError(`${path}: expected ${KEY_FORMAT}`);
  return key;
}

async function syncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes `key` to `path` whole or not at all (a temporary file of mode 0600, synced, then put in
 * place), so that a crash never leaves a partial key. Without `replace`, a key already at `path`
 * wins (two processes racing on a fresh data dir end up with one key): answers whether this one
 * was written.
 */
export async function writeSecretKeyFile(path: string, key: Buffer, replace = false): Promise<boolean> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const handle = await open(tmp, 'wx', 0o600);
    try {
      await handle.chmod(0o600); // whatever the umask allowed
      await handle.writeFile(`${key.toString('base64')}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (replace) {
      await rename(tmp, path);
    } else {
      try {
        await link(tmp, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
        throw error;
      }
    }
    await syncDir(dirname(path));
    return true;
  } finally {
    await rm(tmp, { force: true });
  }
}

/** The key of `dataDir`'s key file, made first when there is none. */
export async function loadOrCreateSecretKey(dataDir: string): Promise<{ key: Buffer; created: boolean }> {
  const path = secretKeyPath(dataDir);
  const existing = await readSecretKeyFile(path);
  if (existing) return { key: existing, created: false };
  const made = randomBytes(KEY_BYTES);
  if (await writeSecretKeyFile(path, made)) return { key: made, created: true };
  return { key: (await readSecretKeyFile(path))!, created: false };
}
