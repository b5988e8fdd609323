import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { entries, isBeingWritten, isMissing } from './files.ts';

/**
 * What a local store's uploads leave behind when their process dies: temp files (a PUT or a part cut
 * off mid-write, a sidecar never renamed into place) and multipart upload folders that no session
 * owns any more. See ObjectStore.removeStale.
 */

/**
 * Removes the temp files in `tmpFolder` last written before `cutoff` (ms since the epoch). A write in
 * progress keeps its file's mtime fresh; those of this process are kept whatever their age (a client
 * that pauses), so only another process's upload that has stalled past the cutoff can lose its file,
 * and then fails instead of placing it.
 */
export async function removeStaleTemps(tmpFolder: string, cutoff: number): Promise<number> {
  let removed = 0;
  for (const name of await entries(tmpFolder)) {
    const path = join(tmpFolder, name);
    if (isBeingWritten(path)) continue;
    const info = await stat(path).catch(() => undefined);
    if (!info || info.mtimeMs >= cutoff) continue;
    await rm(path, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/**
 * Whether the multipart upload in `folder` is left over: started before `cutoff` (its manifest is
 * written once, at start) and of a key `keep` does not claim; or without a manifest (a complete or
 * an abort cut short, or a start that never wrote it) and untouched since the cutoff.
 */
export async function isStaleUpload(
  folder: string,
  manifestName: string,
  cutoff: number,
  keep: (key: string) => Promise<boolean>,
): Promise<boolean> {
  const manifest = join(folder, manifestName);
  try {
    const { key } = JSON.parse(await readFile(manifest, 'utf8')) as { key: string };
    const started = (await stat(manifest)).mtimeMs;
    return started < cutoff && !(await keep(key));
  } catch (error) {
    if (!isMissing(error)) throw error;
  }
  // Removing the manifest touched the folder: an upload ending right now is not stale yet.
  const info = await stat(folder).catch(() => undefined);
  return info !== undefined && info.mtimeMs < cutoff;
}
