import { mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { randomSecret } from '../../../lib/secrets.ts';
import { StoreError } from '../object-store.ts';
import { writers } from '../writer-pool.ts';

/**
 * Files written by the local store: through a temp file in its `.tmp` folder (on the same filesystem,
 * so that renames are atomic), synced to disk before they are renamed into place.
 */

/** How long a body may be: exactly `exact` bytes when declared, and never more than `max`. */
export interface Limits {
  exact?: number;
  max: number;
}

/** Whether a filesystem error says the path (or a folder on the way) does not exist. */
export function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** Makes renames in `folder` durable; best effort (not every platform can fsync a folder). */
export async function syncFolder(folder: string): Promise<void> {
  try {
    const handle = await open(folder, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Durability of the rename is then up to the filesystem.
  }
}

/**
 * Streams `source` into a temp file in `tmpFolder`, counting on the way, and hashing and writing on
 * the writer thread; stops reading as soon as it is longer than allowed. Once complete and fsynced,
 * `place` moves the temp file where it belongs. On any failure the temp file is removed and nothing
 * is placed.
 */
export async function writeStream(
  tmpFolder: string,
  source: AsyncIterable<Buffer>,
  limits: Limits,
  algorithm: 'sha256' | 'md5',
  place: (tmp: string, digest: string, size: number) => Promise<void>,
): Promise<{ size: number; digest: string }> {
  const tmp = join(tmpFolder, randomSecret(12));
  await mkdir(tmpFolder, { recursive: true });
  // Created before anything can fail, so that the cleanup below always finds it.
  const file = await open(tmp, 'wx');
  const sink = writers.open(file.fd, algorithm);
  let size = 0;
  try {
    let digest: string;
    try {
      for await (const chunk of source) {
        size += chunk.length;
        if (size > limits.max) {
          throw limits.exact === undefined
            ? new StoreError('TooLarge', `The request body exceeds ${limits.max} bytes`, {
                max_bytes: limits.max,
              })
            : new StoreError('InvalidArgument', `The body is longer than the declared ${limits.exact} bytes`);
        }
        await sink.write(chunk);
      }
      if (limits.exact !== undefined && size !== limits.exact) {
        throw new StoreError(
          'InvalidArgument',
          `The body has ${size} bytes but ${limits.exact} were declared`,
        );
      }
      digest = await sink.finish(); // written and synced to disk
    } catch (error) {
      await sink.abort();
      throw error;
    } finally {
      await file.close();
    }
    await place(tmp, digest, size);
    return { size, digest };
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

/** Writes a small file so that readers see the old content or the new, never a partial one. */
export async function writeAtomic(tmpFolder: string, path: string, content: string): Promise<void> {
  const tmp = join(tmpFolder, randomSecret(12));
  await mkdir(tmpFolder, { recursive: true });
  try {
    await writeFile(tmp, content, { flag: 'wx', flush: true });
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
  await syncFolder(dirname(path));
}
