import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { ImageConfig } from '../../config.ts';
import { ImageError } from '../../infra/images/errors.ts';
import { type ImageSource, type RenderSpec, renderImage } from '../../infra/images/render.ts';
import { isLocalStore } from '../../infra/storage/local/store.ts';
import { type ObjectStore, StoreError } from '../../infra/storage/object-store.ts';
import { createLimiter } from '../../lib/limiter.ts';
import type * as files from '../files/repo.ts';

/** Renders that may wait for a slot, per slot: past them a request is refused (503 RENDER_BUSY). */
const QUEUED_PER_SLOT = 4;
/** Sources whose own file on the local store this process remembers (a path each). */
const KNOWN_SOURCES = 1_000;

/** What a render reads of its source's file. */
export type SourceFile = Pick<
  files.FileRow,
  'id' | 'project_id' | 'storage_key' | 'etag' | 'content_type' | 'size_bytes'
>;

const tooLarge = (limit: number, size?: number) =>
  new ImageError('TooLarge', `The image is larger than ${limit} bytes`, {
    size_bytes: size,
    max_bytes: limit,
  });

/** Reads a stream whole, refusing more than `limit` bytes. */
async function readBounded(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      stream.destroy();
      throw tooLarge(limit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

/**
 * Renders sources in this process's render slots (COFFER_IMAGE_RENDER_CONCURRENCY, a few waiting per
 * slot), each read within the source limit.
 */
export function createRenderer(deps: { store: ObjectStore; images: ImageConfig }) {
  const { store, images } = deps;
  const concurrency = images.renderConcurrency;
  const limiter = createLimiter(concurrency, {
    maxQueued: concurrency * QUEUED_PER_SLOT,
    error: (queued) =>
      new ImageError('Busy', 'Every render slot is taken: try again shortly', { concurrency, queued }),
  });
  /**
   * The own file of each source rendered from one on the local store, by object key. An object never
   * changes while it exists, so its next render opens the file straight away instead of reading its
   * sidecar first (three system calls on libuv's pool, about 0.7 ms of a 30 ms render).
   */
  const ownFiles = new LRUCache<string, string>({ max: KNOWN_SOURCES });

  /**
   * The source of a render, bounded: on the local store the file holding it, when it has one of its
   * own (the renderer reads it in pieces: no copy of a source of megabytes in memory, nor the time
   * taken to make one); otherwise its bytes.
   */
  async function sourceOf(file: SourceFile): Promise<ImageSource> {
    const own = isLocalStore(store) ? await store.ownFile(file.storage_key) : undefined;
    if (!own) return readBounded(await store.read(file.storage_key), images.maxSourceBytes);
    if (own.size > images.maxSourceBytes) throw tooLarge(images.maxSourceBytes, own.size);
    return own.path;
  }

  /**
   * Renders the source, from the own file it was rendered from before when there is one. A remembered
   * file that fails is forgotten; one gone (the object deleted, and perhaps stored again, by another
   * process) is looked up again, so that the answer is the store's as it is now.
   */
  async function renderSource(file: SourceFile, spec: RenderSpec): Promise<Buffer> {
    const limits = { maxPixels: images.maxPixels, timeoutSeconds: images.renderTimeoutSeconds };
    const remembered = ownFiles.get(file.storage_key);
    if (remembered) {
      try {
        return (await renderImage(remembered, spec, limits)).data;
      } catch (error) {
        ownFiles.delete(file.storage_key);
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    const source = await sourceOf(file);
    const { data } = await renderImage(source, spec, limits);
    if (typeof source === 'string') ownFiles.set(file.storage_key, source);
    return data;
  }

  return {
    /** Reads the source (bounded) and renders it, in a render slot. */
    async make(file: SourceFile, spec: RenderSpec): Promise<Buffer> {
      if (file.size_bytes > images.maxSourceBytes) throw tooLarge(images.maxSourceBytes, file.size_bytes);
      return limiter.run(async () => {
        try {
          return await renderSource(file, spec);
        } catch (error) {
          // The source's own file removed since it was found: the object is gone, as a read would say.
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
            throw new StoreError('NoSuchKey', 'Object not found', undefined, { cause: error });
          }
          throw error;
        }
      });
    },

    /** Whether a render would start at once: a slot is free and none waits for one. */
    slotFree(): boolean {
      const { running, queued } = limiter.load;
      return running < concurrency && queued === 0;
    },

    /** Renders running and waiting for a slot. */
    load: () => limiter.load,
  };
}

export type Renderer = ReturnType<typeof createRenderer>;
