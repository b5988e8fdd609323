import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ImageConfig } from '../../config.ts';
import { forbidden, notFound } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import { ImageError } from '../../infra/images/errors.ts';
import { CONTENT_TYPE_OF, type RenderSpec } from '../../infra/images/render.ts';
import type { Slice } from '../../infra/storage/local/slices.ts';
import { isStoreError, type ObjectStore } from '../../infra/storage/object-store.ts';
import { anyEtag, listsEtag } from '../../lib/etag.ts';
import { hmacHex, safeEqual } from '../../lib/secrets.ts';
import * as files from '../files/repo.ts';
import { type PresignedUrl, requireReady, urlLifetimeSeconds, visibleFile } from '../files/service.ts';
import { createRenditionCache } from './cache.ts';
import { type Admit, createHeadStarts } from './head-start.ts';
import { createKnownFiles } from './known-files.ts';
import { canonical, normalize, type RenditionParams, type RenditionQuery, toQuery } from './params.ts';
import { createRenderer, type SourceFile } from './renderer.ts';
import * as repo from './repo.ts';
import { identify, type Target } from './target.ts';

export type { SourceFile };

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

/** What a request's statement found of its rendition: its size when stored. */
interface Found {
  size: number | undefined;
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
  const renderer = createRenderer({ store, images });
  /** Renders under way in this process, by key, until their bytes are stored. */
  const inFlight = new Map<string, Promise<{ data: Buffer; kept: Promise<void> }>>();
  /** Renditions being stored. */
  const storing = new Set<Promise<void>>();
  const cache = createRenditionCache({ db, store, images, logger });
  const known = createKnownFiles(db);
  const headStarts = createHeadStarts({
    renderer,
    covered: (key) => cache.holds(key) || inFlight.has(key),
  });

  /**
   * Renders once per key in this process: identical requests arriving together share the render. The
   * bytes are answered as soon as they are made, and stored meanwhile; until they are, the same key
   * shares these bytes too. A rendition that could not be stored is made again on the next request.
   */
  function makeOnce(
    file: SourceFile,
    spec: RenderSpec,
    key: string,
  ): Promise<{ data: Buffer; kept: Promise<void> }> {
    let pending = inFlight.get(key);
    if (!pending) {
      // A render started ahead of a statement for this key, taken by a request still under way (this
      // one, or another), makes its bytes.
      const made = headStarts.render(key) ?? renderer.make(file, spec);
      // Stored from the next turn of the event loop: its first steps (the bytes gathered and hashed, in
      // this thread) would otherwise run ahead of writing the answer (about 0.25 ms of each render).
      const kept = made.then(async (data) => {
        await new Promise((resolve) => setImmediate(resolve));
        await cache.keep(file, spec, key, data);
        known.stored(file, key);
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
    const { data, kept } = await makeOnce(file, spec, key);
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
   * A request's answer: the file looked up (and a render started meanwhile, see head-start.ts), admitted,
   * and its rendition or a 304.
   */
  async function respond(
    projectId: string,
    fileId: string,
    params: RenditionParams,
    headers: { accept?: string; ifNoneMatch?: string },
    admit: Admit,
  ): Promise<Rendition | NotModified> {
    const guessed = known.guess(projectId, fileId, params, headers.accept);
    const release = headStarts.take(guessed, headers.ifNoneMatch, admit);
    try {
      const found = await known.lookup(projectId, fileId, params, headers.accept, guessed);
      admit(found?.file);
      const { file, target, stored } = found!;
      return await answer(file, target, stored, headers.ifNoneMatch);
    } finally {
      // Made once by now (kept as any render is), or dropped once no request holds it.
      release?.();
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
    load: renderer.load,
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
