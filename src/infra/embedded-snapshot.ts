import { createReadStream } from 'node:fs';
import { lstat, opendir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { type Pack, pack } from 'tar-stream';

/** Every file under `root`, folders first, as paths relative to it ('' is root itself). */
async function* entries(root: string, relative = ''): AsyncGenerator<{ path: string; folder: boolean }> {
  for await (const entry of await opendir(join(root, relative))) {
    const path = relative ? `${relative}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      yield { path, folder: true };
      yield* entries(root, path);
    } else if (entry.isFile()) yield { path, folder: false };
  }
}

async function fill(tar: Pack, root: string): Promise<void> {
  for await (const { path, folder } of entries(root)) {
    const name = `/${path}`;
    if (folder) {
      tar.entry({ name, type: 'directory', mode: 0o700 });
      continue;
    }
    const { size, mtime } = await lstat(join(root, path));
    await pipeline(createReadStream(join(root, path)), tar.entry({ name, size, mtime, mode: 0o600 }));
  }
  tar.finalize();
}

/**
 * A gzipped tarball of the database folder `root`, in the layout PGlite's dumpDataDir writes (entries
 * named `/base/1/112`…), so that PGlite loads it as its own. Streamed one file at a time: memory
 * stays flat whatever the database's size. The caller keeps the database still while it is read.
 */
export function tarFolder(root: string): Readable {
  const tar = pack();
  void fill(tar, root).catch((error: unknown) => tar.destroy(error as Error));
  const gzip = createGzip();
  tar.on('error', (error) => gzip.destroy(error));
  return tar.pipe(gzip);
}
