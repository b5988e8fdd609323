import { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { ImageConfig } from '../../config.ts';
import { forbidden, notFound } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import { ImageError } from '../../infra/images/errors.ts';
import {
  CONTENT_TYPE_OF,
  type ImageSource,
  type RenderSpec,
  renderImage,
} from '../../infra/images/render.ts';
import { isLocalStore, type Slice } from '../../infra/storage/local/store.ts';
import { isStoreError, type ObjectStore, StoreError } from '../../infra/storage/object-store.ts';
import { anyEtag, listsEtag } from '../../lib/etag.ts';
import { createLimiter } from '../../lib/limiter.ts';
import { hmacHex, safeEqual, sha256Hex } from '../../lib/secrets.ts';
import * as files from '../files/repo.ts';
import { type PresignedUrl, requireReady, urlLifetimeSeconds, visibleFile } from '../files/service.ts';
import { createRenditionCache } from './cache.ts';
import {
  canonical,
  normalize,
  type RenditionParams,
  type RenditionQuery,
  resolveFormat,
  toQuery,
} from './params.ts';
import * as repo from './repo.ts';

/** Renders that may wait for a slot, per slot: past them a request is refused (503 RENDER_BUSY). */
const QUEUED_PER_SLOT = 4;
/** Files whose row this process remembers, to name their renditions before reading them. */
const KNOWN_FILES = 10_000;
/** Sources whose own file on the local store this process remembers (a path each). */
const KNOWN_SOURCES = 1_000;

/** A rendition ready to send: its bytes (from the store, or just made) and what the headers say of them. */
export interface Rendition {
  /** Slices: where a stored rendition's bytes lie in the local store's files. */
  body: Readable | Buffer | Slice[];
  size: number;
  contentType: string;
  /** Quoted; the same for the same source content and parameters, wherever it was made. */
  etag: string;
  /** The format followed the request's Accept header (responses then vary by it). */
  negotiated: boolean;
}

/** The client's copy is the rendition asked for (its If-None-Match names the ETag): nothing to send. */
export interface NotModified {
  notModified: true;
  etag: string;
  negotiated: boolean;
}

/** What a render reads of its source's file. */
export type SourceFile = Pick<
  files.FileRow,
  'id' | 'project_id' | 'storage_key' | 'etag' | 'content_type' | 'size_bytes'
>;

/** The rendition a request asks of a file: the format resolved, its key and ETag. */
interface Target {
  spec: RenderSpec;
  key: string;
  etag: string;
  negotiated: boolean;
}

/** What names a file's renditions, with a request's parameters: its content and its type. */
type Content = Pick<files.FileRow, 'storage_key' | 'etag' | 'content_type'>;

const sameContent = (a: Content, b: Content) =>
  a.storage_key === b.storage_key && a.etag === b.etag && a.content_type === b.content_type;

/**
 * What this process last read of a file: its row, and the keys of its stored renditions (undefined
 * where not known: more than the statement lists, or not read since its content changed).
 */
interface Seen {
  file: repo.ServableFile;
  stored: Set<string> | undefined;
}

/** A request's rendition worked out from what this process last read of the file. */
interface Guess {
  seen: Seen;
  target: Target;
}

/** Throws when a request may not have a rendition of `file` (not found, not visible, not ready). */
type Admit = (file: repo.ServableFile | undefined) => void;

/** What a request's statement found of its rendition: its size when stored, and a render under way. */
interface Found {
  size: number | undefined;
  early?: Promise<Buffer>;
}

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

export function createRenditionService(deps: {
  db: Db;
  store: ObjectStore;
  images: ImageConfig;
  /** The server key: rendition URLs are signed under a key derived from it. */
  secretKey: Buffer;
  publicUrl: string;
  logger: Logger;
}) {
  const { db, store, images, publicUrl, logger } = deps;
  const urlKey = hmacHex(deps.secretKey, 'coffer rendition URLs');
  const concurrency = images.renderConcurrency;
  const limiter = createLimiter(concurrency, {
    maxQueued: concurrency * QUEUED_PER_SLOT,
    error: (queued) =>
      new ImageError('Busy', 'Every render slot is taken: try again shortly', { concurrency, queued }),
  });
  /** Renders under way in this process, by key, until their bytes are stored. */
  const inFlight = new Map<string, Promise<{ data: Buffer; kept: Promise<void> }>>();
  /** Renditions being stored. */
  const storing = new Set<Promise<void>>();
  const cache = createRenditionCache({ db, store, images, logger });
  /** What was last read per file: a request's rendition key is worked out from it and read with the file. */
  const seenFiles = new LRUCache<string, Seen>({ max: KNOWN_FILES });
  /**
   * Renders started ahead of their file's statement, by key, until the requests that share one have
   * their answers (it is then made once, or dropped): requests together share one.
   */
  const headStarts = new Map<string, Promise<Buffer>>();
  /**
   * The own file of each source rendered from one on the local store, by object key. An object never
   * changes while it exists, so its next render opens the file straight away instead of reading its
   * sidecar first (three system calls on libuv's pool, about 0.7 ms of a 30 ms render).
   */
  const ownFiles = new LRUCache<string, string>({ max: KNOWN_SOURCES });

  /**
   * The key and ETag of a rendition: the source's content and the normalised parameters. The content
   * is named by its object (key and ETag, both fixed when it was sealed; new content is a new object)
   * rather than by checksum_sha256, which on S3 is known only after the digest job: a rendition made
   * before it would otherwise be made again after it.
   */
  function identify(file: Pick<SourceFile, 'id' | 'storage_key' | 'etag'>, spec: RenderSpec) {
    const hash = sha256Hex(JSON.stringify([file.storage_key, file.etag, canonical(spec)]));
    return { key: `renditions/${file.id}/${hash}`, etag: `"${hash}"` };
  }

  /** The rendition that parameters and an Accept header ask of a file's content. */
  function targetOf(file: Content & { id: string }, params: RenditionParams, accept?: string): Target {
    const spec = resolveFormat(params, accept, file.content_type);
    return { spec, negotiated: params.format === 'auto', ...identify(file, spec) };
  }

  /** The rendition a request asks, worked out from what this process last read of the file. */
  function guess(projectId: string, fileId: string, params: RenditionParams, accept?: string) {
    const seen = seenFiles.get(`${projectId}/${fileId}`);
    return seen && { seen, target: targetOf(seen.file, params, accept) };
  }

  /**
   * The file and the rendition a request asks of it. With a guess, its key is looked up with the file,
   * in one statement; it holds when the file's content and type are still those it was worked out
   * from. Otherwise the key is worked out from the file and `stored` is left unknown. The caller
   * checks the file before serving anything.
   */
  async function lookup(
    projectId: string,
    fileId: string,
    params: RenditionParams,
    accept: string | undefined,
    guessed: Guess | undefined,
  ) {
    const found = await repo.findFileAndRendition(
      db,
      projectId,
      fileId,
      guessed?.target.key,
      guessed?.seen.stored === undefined,
    );
    if (!found) return undefined;
    const { file, renditionSize, storedKeys } = found;
    const same = guessed && sameContent(guessed.seen.file, file);
    // What this process knows of the same content stays known (and one kept since this statement read
    // the list is not forgotten); the statement's list adds to it.
    const previous = seenFiles.get(`${projectId}/${fileId}`);
    const known = previous && sameContent(previous.file, file) ? previous.stored : undefined;
    const stored =
      storedKeys === undefined
        ? known
        : storedKeys.length >= repo.LISTED_RENDITIONS
          ? undefined
          : new Set([...(known ?? []), ...storedKeys]);
    if (same && renditionSize !== undefined) stored?.add(guessed.target.key);
    seenFiles.set(`${projectId}/${fileId}`, { file, stored });
    if (same) return { file, target: guessed.target, stored: { size: renditionSize } };
    return { file, target: targetOf(file, params, accept), stored: undefined };
  }

  /**
   * A render started before the file's statement answers, from what this process last read of the
   * file: the statement (half a millisecond on the embedded engine, a round trip on PostgreSQL) then
   * runs while it renders. Only where that shows the caller may have the file and the rendition is
   * known not to be stored, for a request without If-None-Match, and while a render slot is free (it
   * never delays another render). Its bytes are answered only once the statement admits the file with
   * the same content, and otherwise dropped unstored.
   */
  function headStart(guessed: Guess | undefined, ifNoneMatch: string | undefined, admit: Admit) {
    if (!guessed || ifNoneMatch !== undefined) return undefined;
    const { seen, target } = guessed;
    const started = headStarts.get(target.key);
    if (started) return started;
    if (!seen.stored || seen.stored.has(target.key) || cache.holds(target.key) || inFlight.has(target.key)) {
      return undefined;
    }
    const { running, queued } = limiter.load;
    if (running >= concurrency || queued > 0) return undefined;
    try {
      admit(seen.file);
    } catch {
      return undefined;
    }
    const render = make(seen.file, target.spec);
    // Its failure is a request's answer only once the statement confirms the file.
    render.catch(() => {});
    headStarts.set(target.key, render);
    return render;
  }

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

  /** Reads the source (bounded) and renders it, in a render slot. */
  async function make(file: SourceFile, spec: RenderSpec): Promise<Buffer> {
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
  }

  /**
   * Renders once per key in this process: identical requests arriving together share the render. The
   * bytes are answered as soon as they are made, and stored meanwhile; until they are, the same key
   * shares these bytes too. A rendition that could not be stored is made again on the next request.
   */
  function makeOnce(
    file: SourceFile,
    spec: RenderSpec,
    key: string,
    early?: Promise<Buffer>,
  ): Promise<{ data: Buffer; kept: Promise<void> }> {
    let pending = inFlight.get(key);
    if (!pending) {
      // A render started ahead of a statement for this key (this request's, or another's) makes its bytes.
      const made = early ?? headStarts.get(key) ?? make(file, spec);
      // Stored from the next turn of the event loop: its first steps (the bytes gathered and hashed, in
      // this thread) would otherwise run ahead of writing the answer (about 0.25 ms of each render).
      const kept = made.then(async (data) => {
        await new Promise((resolve) => setImmediate(resolve));
        await cache.keep(file, spec, key, data);
        seenFiles.get(`${file.project_id}/${file.id}`)?.stored?.add(key);
      });
      pending = made.then((data) => ({ data, kept }));
      inFlight.set(key, pending);
      const settled = kept
        .catch((error) => {
          // The render's own failure is the requester's answer; only a failed store is worth a line.
          if (!(error instanceof ImageError)) logger.warn({ err: error, key }, 'rendition not stored');
        })
        .finally(() => {
          inFlight.delete(key);
          storing.delete(settled);
        });
      storing.add(settled);
    }
    return pending;
  }

  /**
   * The rendition of a ready file: from the store when made before, else rendered once (per key) and
   * kept; with `stored`, only once it is kept. `found` is what the file's statement found of it,
   * when it looked.
   */
  async function deliver(
    file: SourceFile,
    target: Target,
    found: Found | undefined,
    options: { stored?: boolean } = {},
  ): Promise<Rendition> {
    const { key, etag, spec, negotiated } = target;
    const contentType = CONTENT_TYPE_OF[spec.format];
    const size = found ? found.size : (await repo.findRendition(db, key))?.size_bytes;
    if (size !== undefined) {
      try {
        const body = await cache.readStored(key, size);
        cache.markUsed(key);
        return { body, size: Buffer.isBuffer(body) ? body.length : size, contentType, etag, negotiated };
      } catch (error) {
        // Evicted meanwhile (by another server): made again below.
        if (!isStoreError(error, 'NoSuchKey')) throw error;
        await repo.forgetRenditions(db, [key]);
      }
    }
    const { data, kept } = await makeOnce(file, spec, key, found?.early);
    if (options.stored) await kept;
    return { body: data, size: data.length, contentType, etag, negotiated };
  }

  /**
   * The rendition, or that the client holds it already: a rendition's ETag names its source content
   * and parameters, so an If-None-Match naming it is answered without reading or making any bytes
   * (a copy evicted from the store included). `*` holds only for a rendition that is, or can be,
   * made: one not known to be stored is made (or refused) first.
   */
  async function answer(
    file: SourceFile,
    target: Target,
    found: Found | undefined,
    ifNoneMatch: string | undefined,
  ): Promise<Rendition | NotModified> {
    if (ifNoneMatch === undefined || !listsEtag(ifNoneMatch, target.etag))
      return deliver(file, target, found);
    if (found?.size !== undefined) cache.markUsed(target.key);
    else if (anyEtag(ifNoneMatch)) {
      const made = await deliver(file, target, found);
      if (made.body instanceof Readable) made.body.destroy();
    }
    return { notModified: true, etag: target.etag, negotiated: target.negotiated };
  }

  /**
   * A request's answer: the file looked up (and a render started meanwhile, see headStart), admitted,
   * and its rendition or a 304.
   */
  async function respond(
    projectId: string,
    fileId: string,
    params: RenditionParams,
    headers: { accept?: string; ifNoneMatch?: string },
    admit: Admit,
  ): Promise<Rendition | NotModified> {
    const guessed = guess(projectId, fileId, params, headers.accept);
    const early = headStart(guessed, headers.ifNoneMatch, admit);
    try {
      const found = await lookup(projectId, fileId, params, headers.accept, guessed);
      admit(found?.file);
      const { file, target, stored } = found!;
      // `stored` is known only when the guess held, and with it the render started from the guess.
      return await answer(file, target, stored && { ...stored, early }, headers.ifNoneMatch);
    } finally {
      // Made once by now (kept as any render is), or dropped.
      if (early && headStarts.get(guessed!.target.key) === early) headStarts.delete(guessed!.target.key);
    }
  }

  /** The rendition `spec` of a ready file (see deliver). */
  const serve = (file: SourceFile, spec: RenderSpec, negotiated: boolean, options?: { stored?: boolean }) =>
    deliver(file, { spec, negotiated, ...identify(file, spec) }, undefined, options);

  /** The signed fields of a rendition URL, in one unambiguous spelling. */
  const signature = (projectId: string, fileId: string, params: RenditionParams, expires: number) =>
    hmacHex(urlKey, JSON.stringify(['rendition', projectId, fileId, canonical(params), expires]));

  return {
    serve,
    /** Renders running and waiting for a slot in this process. */
    load: () => limiter.load,
    /** Writes the uses of stored renditions not written yet (before the database closes, say). */
    flushUses: cache.flushUses,
    /** Resolves once every rendition made so far is stored (or failed to be). */
    async stored(): Promise<void> {
      while (storing.size > 0) await Promise.all(storing);
    },

    /** GET …/render: the rendition of a ready file the caller may read. */
    async render(
      caller: Caller,
      fileId: string,
      query: RenditionQuery,
      headers: { accept?: string; ifNoneMatch?: string },
    ) {
      return respond(caller.project.id, fileId, normalize(query), headers, (file) =>
        requireReady(visibleFile(caller, file, { allowQuarantined: true })),
      );
    },

    /** A URL of the rendition that needs no key: it binds the file, the parameters and the expiry. */
    async presign(
      caller: Caller,
      fileId: string,
      query: RenditionQuery,
      ttl: number | undefined,
    ): Promise<PresignedUrl> {
      const seconds = urlLifetimeSeconds(caller.project, ttl, caller.project.settings.signed_url_ttl_seconds);
      const params = normalize(query);
      const file = visibleFile(caller, await files.findFile(db, caller.project.id, fileId));
      requireReady(file);
      const expires = Math.ceil(Date.now() / 1000) + seconds;
      const search = new URLSearchParams({
        ...toQuery(params),
        exp: String(expires),
        sig: signature(file.project_id, file.id, params, expires),
      });
      return {
        url: `${publicUrl}/renditions/${file.project_id}/${file.id}?${search}`,
        expires_at: new Date(expires * 1000).toISOString(),
      };
    },

    /** GET /renditions/…: a presigned rendition URL, checked; answers the rendition and its expiry. */
    async renderSigned(
      projectId: string,
      fileId: string,
      query: RenditionQuery & { exp: number; sig: string },
      headers: { accept?: string; ifNoneMatch?: string },
    ): Promise<(Rendition | NotModified) & { expires: number }> {
      const params = normalize(query);
      if (!safeEqual(signature(projectId, fileId, params, query.exp), query.sig)) {
        throw forbidden('The URL signature is invalid');
      }
      if (Date.now() >= query.exp * 1000) throw forbidden('The URL has expired');
      const rendition = await respond(projectId, fileId, params, headers, (file) => {
        if (!file || file.deleted_at !== null) throw notFound('File');
        requireReady(file);
      });
      return { ...rendition, expires: query.exp };
    },
  };
}

export type RenditionService = ReturnType<typeof createRenditionService>;
