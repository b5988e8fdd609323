import { rename } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Caller } from '../../src/domain/principal.ts';
import { SMALL_BODY } from '../../src/infra/storage/local/files.ts';
import { isLocalStore } from '../../src/infra/storage/local/store.ts';
import { createRenditionService, type SourceFile } from '../../src/modules/renditions/service.ts';
import { storage } from '../support/backends.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, settledChecksum, upload } from '../support/files.ts';
import {
  animatedGif,
  bombPng,
  hasGps,
  noise,
  sidewaysJpegWithGps,
  translucentPng,
} from '../support/images.ts';
import { sleep } from '../support/processes.ts';

let coffer: TestCoffer;
let project: TestProject;
beforeAll(async () => {
  coffer = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0' });
  project = await coffer.newProject();
});
afterAll(() => coffer.close());

async function stored(target: TestProject, filename: string, contentType: string, bytes: Buffer) {
  const reply = await upload(target, { filename, content_type: contentType, bytes });
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  expect(reply.body.status).toBe('ready');
  return reply.body as { id: string; storage_key: string };
}

interface Rendered {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json?: any;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Rendered> {
  const response = await fetch(url, { headers });
  const bytes = Buffer.from(await response.arrayBuffer());
  const isJson = response.headers.get('content-type')?.startsWith('application/json');
  return {
    status: response.status,
    headers: response.headers,
    bytes,
    json: isJson ? JSON.parse(bytes.toString()) : undefined,
  };
}

function render(
  target: TestProject,
  fileId: string,
  query: Record<string, string | number | boolean | undefined>,
  headers: Record<string, string> = {},
  on: TestCoffer = coffer,
) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) search.set(name, String(value));
  return get(`${on.url}/v1/projects/${target.id}/files/${fileId}/render?${search}`, {
    authorization: `Bearer ${target.key}`,
    ...headers,
  });
}

/**
 * Runs (and awaits) `onRead` before each time a render takes the source `key` from the store of `on`:
 * the local store is asked for its file first (a small object's bytes are read after), others read
 * it. Answers how to undo it.
 */
function onSourceRead(on: TestCoffer, key: string, onRead: () => unknown): () => void {
  const store = on.services.store;
  if (isLocalStore(store)) {
    const ownFile = store.ownFile.bind(store);
    store.ownFile = async (fileKey) => {
      if (fileKey === key) await onRead();
      return ownFile(fileKey);
    };
    return () => {
      store.ownFile = ownFile;
    };
  }
  const read = store.read.bind(store);
  store.read = async (readKey, range) => {
    if (readKey === key) await onRead();
    return read(readKey, range);
  };
  return () => {
    store.read = read;
  };
}

describe('GET …/render', () => {
  it('applies the EXIF orientation, strips every metadata block and answers the asked format and size', async () => {
    const source = await sidewaysJpegWithGps();
    const before = await sharp(source).metadata();
    expect(before.orientation).toBe(6);
    expect(hasGps(before.exif)).toBe(true);
    const file = await stored(project, 'photo.jpg', 'image/jpeg', source);

    const reply = await render(project, file.id, { width: 100, format: 'webp' });
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toBe('image/webp');
    expect(reply.headers.get('cache-control')).toBe('private');
    expect(reply.headers.get('etag')).toMatch(/^"[0-9a-f]{64}"$/);
    const out = await sharp(reply.bytes).metadata();
    // Shown upright (300 × 600), so 100 wide is 200 high.
    expect({ format: out.format, width: out.width, height: out.height }).toEqual({
      format: 'webp',
      width: 100,
      height: 200,
    });
    expect(out.orientation).toBeUndefined();
    expect(out.exif).toBeUndefined();
    expect(out.xmp).toBeUndefined();
  });

  it('renders a source past SMALL_BODY (a file of its own on the local store) from exactly its bytes', async () => {
    const source = await noise(400, 300).jpeg({ quality: 95 }).toBuffer();
    expect(source.length).toBeGreaterThan(SMALL_BODY);
    const file = await stored(project, 'noise.jpg', 'image/jpeg', source);
    const reply = await render(project, file.id, { width: 200, format: 'png' });
    expect(reply.status).toBe(200);
    const pixels = await sharp(reply.bytes).raw().toBuffer({ resolveWithObject: true });
    expect([pixels.info.width, pixels.info.height]).toEqual([200, 150]);
    expect(pixels.data.equals(await sharp(source).resize({ width: 200 }).raw().toBuffer())).toBe(true);
  });

  it.skipIf(storage !== 'local')(
    'answers a source file gone before its render with 404 and one that cannot be read with 500, not as a bad image',
    async () => {
      const store = coffer.services.store;
      if (!isLocalStore(store)) throw new Error('a local store was expected');
      const source = await noise(400, 300).jpeg().toBuffer();
      const file = await stored(project, 'vanishing.jpg', 'image/jpeg', source);
      const ownFile = store.ownFile.bind(store);
      try {
        // Found, then removed before it is read (as a concurrent collection would).
        store.ownFile = async (key) => {
          const own = await ownFile(key);
          return own && { ...own, path: `${own.path}.gone` };
        };
        const gone = await render(project, file.id, { width: 100, format: 'png' });
        expect([gone.status, gone.json?.error.code]).toEqual([404, 'NOT_FOUND']);
        // A path the server cannot read an image from (a folder): the server's failure.
        store.ownFile = async (key) => {
          const own = await ownFile(key);
          return own && { ...own, path: store.dir };
        };
        const unreadable = await render(project, file.id, { width: 100, format: 'png' });
        expect(unreadable.status).toBe(500);
      } finally {
        store.ownFile = ownFile;
      }
      expect((await render(project, file.id, { width: 100, format: 'png' })).status).toBe(200);
    },
  );

  it.skipIf(storage !== 'local')(
    "renders again from the source's own file found before, and finds it anew once it is gone",
    async () => {
      const store = coffer.services.store;
      if (!isLocalStore(store)) throw new Error('a local store was expected');
      const source = await noise(400, 300).jpeg().toBuffer();
      const file = await stored(project, 'again.jpg', 'image/jpeg', source);
      const ownFile = store.ownFile.bind(store);
      const own = (await ownFile(file.storage_key))!;
      let lookups = 0;
      let moved: string | undefined;
      store.ownFile = async (key) => {
        const found = await ownFile(key);
        if (key !== file.storage_key) return found;
        lookups++;
        return found && moved ? { ...found, path: moved } : found;
      };
      const width = async (wide: number) => {
        const reply = await render(project, file.id, { width: wide, format: 'png' });
        expect(reply.status).toBe(200);
        return (await sharp(reply.bytes).metadata()).width;
      };
      try {
        expect([await width(100), await width(101)]).toEqual([100, 101]);
        expect(lookups).toBe(1);
        // Its file gone from where it was found (as when another process deleted the object and it was
        // stored again): looked up anew, not answered as missing.
        moved = `${own.path}.moved`;
        await rename(own.path, moved);
        expect([await width(102), await width(103)]).toEqual([102, 103]);
        expect(lookups).toBe(2);
      } finally {
        store.ownFile = ownFile;
        if (moved) await rename(moved, own.path);
      }
    },
  );

  it('fits both sides as asked: cover crops, contain pads, inside stays within', async () => {
    const file = await stored(project, 'wide.png', 'image/png', await translucentPng(200, 100));
    const size = async (fit: string) => {
      const reply = await render(project, file.id, { width: 50, height: 50, fit, format: 'png' });
      expect(reply.status).toBe(200);
      const meta = await sharp(reply.bytes).metadata();
      return [meta.width, meta.height];
    };
    expect(await size('cover')).toEqual([50, 50]);
    expect(await size('contain')).toEqual([50, 50]);
    expect(await size('fill')).toEqual([50, 50]);
    expect(await size('inside')).toEqual([50, 25]);
  });

  it('keeps the alpha channel in PNG and WebP, flattens it in JPEG', async () => {
    const file = await stored(project, 'alpha.png', 'image/png', await translucentPng());
    const channels = async (format: string) => {
      const reply = await render(project, file.id, { width: 40, format });
      expect(reply.headers.get('content-type')).toBe(`image/${format}`);
      return (await sharp(reply.bytes).metadata()).hasAlpha;
    };
    expect(await channels('png')).toBe(true);
    expect(await channels('webp')).toBe(true);
    expect(await channels('jpeg')).toBe(false);
  });

  it('chooses the format from Accept with auto: AVIF, then WebP, then the source format', async () => {
    const file = await stored(project, 'auto.png', 'image/png', await translucentPng());
    const formatFor = async (accept: string | undefined) => {
      const reply = await render(project, file.id, { width: 20 }, accept ? { accept } : {});
      expect(reply.headers.get('vary')).toBe('Accept');
      return (await sharp(reply.bytes).metadata()).format;
    };
    expect(await formatFor('image/avif,image/webp,*/*')).toBe('heif');
    expect(await formatFor('image/webp,*/*')).toBe('webp');
    expect(await formatFor('image/avif;q=0,image/webp')).toBe('webp');
    expect(await formatFor('*/*')).toBe('png');
    expect(await formatFor(undefined)).toBe('png');
  });

  it('keeps the first frame of an animated GIF unless asked for all of them', async () => {
    const file = await stored(project, 'anim.gif', 'image/gif', await animatedGif());
    const still = await render(project, file.id, { width: 20 });
    expect(still.headers.get('content-type')).toBe('image/jpeg'); // a GIF source without Accept
    const stillMeta = await sharp(still.bytes).metadata();
    expect([stillMeta.width, stillMeta.height, stillMeta.pages ?? 1]).toEqual([20, 15, 1]);
    const first = await sharp(still.bytes).raw().toBuffer();
    expect(first[0]).toBeGreaterThan(200); // red
    expect(first[1]).toBeLessThan(60);

    const moving = await render(project, file.id, { width: 20, animated: true });
    expect(moving.headers.get('content-type')).toBe('image/webp');
    const movingMeta = await sharp(moving.bytes, { animated: true }).metadata();
    expect([movingMeta.width, movingMeta.pageHeight, movingMeta.pages]).toEqual([20, 15, 3]);

    const refused = await render(project, file.id, { width: 20, animated: true, format: 'jpeg' });
    expect(refused.status).toBe(422);
    expect(refused.json.error.code).toBe('VALIDATION_ERROR');
  });

  it('refuses a decompression bomb from its header, SVG, text and a truncated JPEG with 422', async () => {
    // A small one (kept with its description on the local store) and one past SMALL_BODY (a file of
    // its own there, which the renderer opens itself).
    const bombs = [bombPng(), bombPng(30_000, 2 * SMALL_BODY)];
    expect(bombs[0]!.length).toBeLessThan(2048);
    expect(bombs[1]!.length).toBeGreaterThan(SMALL_BODY);
    const memoryBefore = process.memoryUsage().rss;
    for (const [index, bomb] of bombs.entries()) {
      const bombFile = await stored(project, `bomb-${index}.png`, 'image/png', bomb);
      const refused = await render(project, bombFile.id, { width: 100 });
      expect(refused.status).toBe(422);
      expect(refused.json.error).toMatchObject({
        code: 'IMAGE_TOO_LARGE',
        details: { width: 30_000, height: 30_000 },
      });
    }
    // 30000 × 30000 RGB would be 2.5 GiB decoded.
    expect(process.memoryUsage().rss - memoryBefore).toBeLessThan(256 * 1024 * 1024);

    // Each small, and past SMALL_BODY (an SVG that libvips would render, were it handed the file).
    const logo = (padding: number) =>
      `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><!--${' '.repeat(padding)}--><rect width="10" height="10"/></svg>`;
    const svg = await stored(project, 'logo.svg', 'image/svg+xml', Buffer.from(logo(0)));
    const longSvg = await stored(project, 'long.svg', 'image/svg+xml', Buffer.from(logo(2 * SMALL_BODY)));
    const text = await stored(project, 'notes.txt', 'text/plain', Buffer.from('not an image'));
    const longText = await stored(project, 'long.txt', 'text/plain', Buffer.alloc(2 * SMALL_BODY, 'text '));
    const jpeg = await sharp({ create: { width: 400, height: 400, channels: 3, background: '#808080' } })
      .jpeg()
      .toBuffer();
    const truncated = await stored(
      project,
      'cut.jpg',
      'image/jpeg',
      jpeg.subarray(0, Math.floor(jpeg.length / 2)),
    );
    for (const file of [svg, longSvg, text, longText, truncated]) {
      const reply = await render(project, file.id, { width: 50 });
      expect(reply.status, file.id).toBe(422);
      expect(reply.json.error.code).toBe('NOT_AN_IMAGE');
    }
    // `If-None-Match: *` holds only where a rendition can be made.
    const any = await render(project, text.id, { width: 50 }, { 'if-none-match': '*' });
    expect([any.status, any.json?.error.code]).toEqual([422, 'NOT_AN_IMAGE']);
  });

  it('refuses a file that is not ready with 409 INVALID_STATE, a deleted one with 404, bad parameters with 422', async () => {
    const pending = await initiate(project, {
      filename: 'later.png',
      content_type: 'image/png',
      bytes: await translucentPng(),
    });
    const notReady = await render(project, pending.file_id, { width: 10 });
    expect(notReady.status).toBe(409);
    expect(notReady.json.error.code).toBe('INVALID_STATE');

    const file = await stored(project, 'gone.png', 'image/png', await translucentPng());
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
    expect((await render(project, file.id, { width: 10 })).status).toBe(404);

    const live = await stored(project, 'live.png', 'image/png', await translucentPng());
    for (const query of [{ width: 0 }, { height: 4097 }, { quality: 101 }]) {
      const reply = await render(project, live.id, query);
      expect(reply.status, JSON.stringify(query)).toBe(422);
    }
    expect((await render(project, live.id, { fit: 'stretch' })).status).toBe(400);
  });

  it('renders once, then serves the stored rendition (ETag, 304) without reading the source', async () => {
    const file = await stored(project, 'once.png', 'image/png', await translucentPng());
    let sourceReads = 0;
    const restore = onSourceRead(coffer, file.storage_key, () => sourceReads++);
    try {
      // Identical requests arriving together: one render.
      const first = await Promise.all(
        Array.from({ length: 5 }, () => render(project, file.id, { width: 64, format: 'webp' })),
      );
      expect(first.map((reply) => reply.status)).toEqual([200, 200, 200, 200, 200]);
      expect(sourceReads).toBe(1);
      const etag = first[0]!.headers.get('etag')!;
      for (const reply of first) expect(reply.bytes.equals(first[0]!.bytes)).toBe(true);

      const again = await render(project, file.id, { width: 64, format: 'webp' });
      expect(again.status).toBe(200);
      expect(again.headers.get('etag')).toBe(etag);
      expect(again.bytes.equals(first[0]!.bytes)).toBe(true);
      expect(sourceReads).toBe(1);
      const notModified = await render(
        project,
        file.id,
        { width: 64, format: 'webp' },
        { 'if-none-match': etag },
      );
      expect(notModified.status).toBe(304);
      // If-None-Match compares weakly (RFC 9110), in a list, or `*`; another ETag is answered in full.
      for (const [header, status] of [
        [`"other", W/${etag}`, 304],
        ['*', 304],
        ['"other"', 200],
      ] as const) {
        const reply = await render(
          project,
          file.id,
          { width: 64, format: 'webp' },
          { 'if-none-match': header },
        );
        expect([header, reply.status]).toEqual([header, status]);
      }

      // Answered as soon as made; stored meanwhile.
      await coffer.services.renditions.stored();
      const rows = await coffer.services.db.query<{ key: string; size_bytes: number }>(
        'SELECT key, size_bytes FROM renditions WHERE file_id = $1',
        [file.id],
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]!.size_bytes).toBe(first[0]!.bytes.length);
      expect((await coffer.services.store.head(rows[0]!.key))?.size).toBe(first[0]!.bytes.length);

      // Other parameters are another rendition, made and stored apart.
      const other = await render(project, file.id, { width: 65, format: 'webp' });
      expect(other.status).toBe(200);
      expect(other.headers.get('etag')).not.toBe(etag);
      await coffer.services.renditions.stored();
      const both = await coffer.services.db.query('SELECT key FROM renditions WHERE file_id = $1', [file.id]);
      expect(both).toHaveLength(2);
    } finally {
      restore();
    }
  });

  it('confirms a copy the client holds (If-None-Match) without reading or rendering, even once evicted', async () => {
    const file = await stored(project, 'revalidated.png', 'image/png', await translucentPng());
    const query = { width: 48, format: 'webp' };
    const first = await render(project, file.id, query);
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag')!;
    await coffer.services.renditions.stored();
    const { db, store } = coffer.services;
    const reads: string[] = [];
    const read = store.read.bind(store);
    store.read = (key, range) => {
      reads.push(key);
      return read(key, range);
    };
    let sourceReads = 0;
    const restore = onSourceRead(coffer, file.storage_key, () => sourceReads++);
    try {
      // Evicted since (row and object gone): the client's copy is still the rendition it asks for.
      const [row] = await db.query<{ key: string }>(
        'DELETE FROM renditions WHERE file_id = $1 RETURNING key',
        [file.id],
      );
      await store.delete(row!.key);
      const notModified = await render(project, file.id, query, { 'if-none-match': etag });
      expect(notModified.status).toBe(304);
      expect(notModified.headers.get('etag')).toBe(etag);
      expect(notModified.bytes).toHaveLength(0);
      await coffer.services.renditions.stored();
      expect(sourceReads).toBe(0);
      expect(reads).toEqual([]);
      expect(await db.query('SELECT key FROM renditions WHERE file_id = $1', [file.id])).toEqual([]);

      // Without the header it is made again, the same bytes under the same ETag.
      const again = await render(project, file.id, query);
      expect(again.status).toBe(200);
      expect(again.headers.get('etag')).toBe(etag);
      expect(again.bytes.equals(first.bytes)).toBe(true);
      expect(sourceReads).toBe(1);

      // The file is checked before the copy: once deleted, 404 whatever the client holds.
      expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
      const gone = await render(project, file.id, query, { 'if-none-match': etag });
      expect(gone.status).toBe(404);
    } finally {
      restore();
      store.read = read;
    }
  });

  it('writes the answer before it stores the rendition', async () => {
    const file = await stored(project, 'first.png', 'image/png', await translucentPng());
    const store = coffer.services.store;
    const events: string[] = [];
    const write = store.write.bind(store);
    store.write = (key, body, options) => {
      if (key.startsWith(`renditions/${file.id}/`)) events.push('stored');
      return write(key, body, options);
    };
    const onRequest = (request: IncomingMessage, response: ServerResponse) => {
      if (request.url?.includes(`/files/${file.id}/render`))
        response.on('finish', () => events.push('answered'));
    };
    coffer.app.server.on('request', onRequest);
    try {
      expect((await render(project, file.id, { width: 20, format: 'png' })).status).toBe(200);
      await coffer.services.renditions.stored();
      expect(events).toEqual(['answered', 'stored']);
    } finally {
      coffer.app.server.off('request', onRequest);
      store.write = write;
    }
  });

  it("starts a render of a file it read before while the file's statement runs, and answers or keeps it only once the statement admits the file", async () => {
    const file = await stored(project, 'ahead.png', 'image/png', await translucentPng());
    expect((await render(project, file.id, { width: 24, format: 'png' })).status).toBe(200);
    const { db, store } = coffer.services;
    const events: string[] = [];
    const write = store.write.bind(store);
    store.write = (key, body, options) => {
      if (key.startsWith(`renditions/${file.id}/`)) events.push('stored');
      return write(key, body, options);
    };
    let sourceRead = () => {};
    const restore = onSourceRead(coffer, file.storage_key, () => {
      events.push('source read');
      sourceRead();
    });
    const query = db.query.bind(db);
    // The file's statement answers once the source is read, or after 2 s: a render that waits for it
    // reads the source after it.
    db.query = (async (text: string, params?: unknown[]) => {
      if (!text.includes('rendition_size')) return query(text, params);
      const read = new Promise<void>((resolve) => {
        sourceRead = resolve;
      });
      await Promise.race([read, new Promise((resolve) => setTimeout(resolve, 2000))]);
      const rows = await query(text, params);
      events.push('statement');
      return rows;
    }) as typeof db.query;
    try {
      const ahead = await render(project, file.id, { width: 25, format: 'png' });
      expect(ahead.status).toBe(200);
      expect((await sharp(ahead.bytes).metadata()).width).toBe(25);
      await coffer.services.renditions.stored();
      expect(events).toEqual(['source read', 'statement', 'stored']);

      // Quarantined by another server: this one still holds the file as ready, renders ahead, and
      // answers the refusal; what it rendered is neither sent nor kept.
      await query("UPDATE files SET status = 'quarantined' WHERE id = $1", [file.id]);
      events.length = 0;
      const refused = await render(project, file.id, { width: 26, format: 'png' });
      expect([refused.status, refused.json?.error.code]).toEqual([409, 'INVALID_STATE']);
      expect(events).toEqual(['source read', 'statement']);
      await coffer.services.renditions.stored();
      expect(events).toEqual(['source read', 'statement']);
      const kept = await query('SELECT key FROM renditions WHERE file_id = $1', [file.id]);
      expect(kept).toHaveLength(2);
    } finally {
      db.query = query;
      store.write = write;
      restore();
    }
  });

  it('shares a render ahead with every request that took it, until the last has its answer', async () => {
    const file = await stored(project, 'shared.png', 'image/png', await translucentPng());
    expect((await render(project, file.id, { width: 24, format: 'png' })).status).toBe(200);
    await coffer.services.renditions.stored();
    const { db } = coffer.services;
    let sourceReads = 0;
    const restore = onSourceRead(coffer, file.storage_key, () => sourceReads++);
    const query = db.query.bind(db);
    const isStored = async () =>
      (await query('SELECT key FROM renditions WHERE file_id = $1', [file.id])).length === 2;
    // Both statements answer once both requests took the render ahead; the second's (read before the
    // rendition was stored) only once the first request has its answer and the rendition is stored.
    let statements = 0;
    let bothStarted = () => {};
    const started = new Promise<void>((resolve) => {
      bothStarted = resolve;
    });
    db.query = (async (text: string, params?: unknown[]) => {
      if (!text.includes('rendition_size')) return query(text, params);
      const turn = statements++;
      if (statements === 2) bothStarted();
      const rows = await query(text, params);
      await started;
      if (turn === 1) {
        while (!(await isStored())) await sleep(10);
        await coffer.services.renditions.stored();
      }
      return rows;
    }) as typeof db.query;
    try {
      const replies = await Promise.all(
        [0, 1].map(() => render(project, file.id, { width: 27, format: 'png' })),
      );
      expect(replies.map((reply) => reply.status)).toEqual([200, 200]);
      expect(replies[1]!.bytes.equals(replies[0]!.bytes)).toBe(true);
      expect(sourceReads).toBe(1);
      await coffer.services.renditions.stored();
    } finally {
      db.query = query;
      restore();
    }
  });

  it('renders anew once a render ahead failed, though a request that took it still waits', async () => {
    const file = await stored(project, 'flaky.png', 'image/png', await translucentPng());
    expect((await render(project, file.id, { width: 24, format: 'png' })).status).toBe(200);
    await coffer.services.renditions.stored();
    const { db } = coffer.services;
    let failing = true;
    const restore = onSourceRead(coffer, file.storage_key, () => {
      if (failing) throw new Error('the source cannot be read for now');
    });
    const query = db.query.bind(db);
    // Both requests take the render ahead; the second's statement answers only once a third request
    // has its answer, so the second still holds the failed render meanwhile.
    let statements = 0;
    let bothStarted = () => {};
    const started = new Promise<void>((resolve) => {
      bothStarted = resolve;
    });
    let releaseSecond = () => {};
    const secondReleased = new Promise<void>((resolve) => {
      releaseSecond = resolve;
    });
    db.query = (async (text: string, params?: unknown[]) => {
      if (!text.includes('rendition_size')) return query(text, params);
      const turn = statements++;
      if (statements === 2) bothStarted();
      const rows = await query(text, params);
      if (turn <= 1) await started;
      if (turn === 1) await secondReleased;
      return rows;
    }) as typeof db.query;
    try {
      const first = render(project, file.id, { width: 27, format: 'png' });
      const second = render(project, file.id, { width: 27, format: 'png' });
      expect((await first).status).toBe(500);
      failing = false;
      const third = await render(project, file.id, { width: 27, format: 'png' });
      releaseSecond();
      // The second, which took the failed render, is answered from the third's.
      expect([(await second).status, third.status]).toEqual([200, 200]);
      await coffer.services.renditions.stored();
    } finally {
      db.query = query;
      restore();
    }
  });

  it('renders ahead only a rendition it knows is not stored: one another server stored is served', async () => {
    const file = await stored(project, 'elsewhere.png', 'image/png', await translucentPng());
    for (const width of [20, 21]) {
      expect((await render(project, file.id, { width, format: 'png' })).status).toBe(200);
    }
    await coffer.services.renditions.stored();
    // Another server over the same database and store, that made neither rendition.
    const other = createRenditionService({
      db: coffer.services.db,
      store: coffer.services.store,
      images: coffer.config.images,
      secretKey: Buffer.alloc(32, 1),
      publicUrl: coffer.url,
      logger: pino({ level: 'silent' }),
    });
    const caller = { project: { id: project.id }, principal: { kind: 'api_key' } } as unknown as Caller;
    let sourceReads = 0;
    const restore = onSourceRead(coffer, file.storage_key, () => sourceReads++);
    try {
      const served = async (width: number) => {
        const rendition = await other.render(caller, file.id, { width, format: 'png' }, {});
        return 'body' in rendition && Buffer.isBuffer(rendition.body) ? rendition.body.length : 0;
      };
      expect(await served(20)).toBeGreaterThan(0);
      // Its row read once, the server knows 21 is stored: served, not rendered ahead for nothing.
      expect(await served(21)).toBeGreaterThan(0);
      expect(sourceReads).toBe(0);
      expect(await served(22)).toBeGreaterThan(0);
      expect(sourceReads).toBe(1);
      await other.stored();
    } finally {
      restore();
    }
  });

  it('drops what it rendered ahead from content that changed behind its back, and renders the new content', async () => {
    const file = await stored(project, 'moved.png', 'image/png', await translucentPng(200, 100));
    const tall = await stored(project, 'tall.png', 'image/png', await translucentPng(100, 200));
    expect((await render(project, file.id, { width: 10, format: 'png' })).status).toBe(200);
    await coffer.services.renditions.stored();
    // Replaced by another server: this one still holds the old content as the file's.
    const { db } = coffer.services;
    await db.query(
      `UPDATE files SET storage_key = t.storage_key, etag = t.etag FROM files t WHERE files.id = $1 AND t.id = $2`,
      [file.id, tall.id],
    );
    const replies = await Promise.all(
      [1, 2, 3].map(() => render(project, file.id, { width: 50, format: 'png' })),
    );
    for (const reply of replies) {
      expect(reply.status).toBe(200);
      const { width, height } = await sharp(reply.bytes).metadata();
      expect({ width, height }).toEqual({ width: 50, height: 100 });
    }
    await coffer.services.renditions.stored();
    const kept = await db.query('SELECT key FROM renditions WHERE file_id = $1', [file.id]);
    expect(kept).toHaveLength(2);
  });

  it('keeps serving the same rendition once the checksum is known (S3: after the digest job)', async () => {
    const file = await stored(project, 'digested.png', 'image/png', await translucentPng());
    let sourceReads = 0;
    const restore = onSourceRead(coffer, file.storage_key, () => sourceReads++);
    try {
      const first = await render(project, file.id, { width: 33, format: 'png' });
      await coffer.services.renditions.stored();
      expect(await settledChecksum(coffer, project, file.id)).toMatch(/^[0-9a-f]{64}$/);
      const readsBefore = sourceReads; // the digest job reads the source too
      const again = await render(project, file.id, { width: 33, format: 'png' });
      expect(again.headers.get('etag')).toBe(first.headers.get('etag'));
      expect(sourceReads).toBe(readsBefore);
    } finally {
      restore();
    }
  });

  it('collects the renditions with their file', async () => {
    const file = await stored(project, 'collected.png', 'image/png', await translucentPng());
    expect((await render(project, file.id, { width: 30, format: 'png' })).status).toBe(200);
    await coffer.services.renditions.stored();
    const [row] = await coffer.services.db.query<{ key: string }>(
      'SELECT key FROM renditions WHERE file_id = $1',
      [file.id],
    );
    expect(await coffer.services.store.head(row!.key)).toBeDefined();
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
    await coffer.services.collector.sweep();
    expect(await coffer.services.store.head(row!.key)).toBeUndefined();
    expect(
      await coffer.services.db.query('SELECT key FROM renditions WHERE file_id = $1', [file.id]),
    ).toEqual([]);
  });
});

describe('GET …/download with rendition parameters', () => {
  it('answers a URL of the rendition that needs no key and binds its parameters', async () => {
    const file = await stored(project, 'shared.jpg', 'image/jpeg', await sidewaysJpegWithGps());
    const reply = await project.call('GET', `/files/${file.id}/download?width=60&format=webp&ttl=600`);
    expect(reply.status).toBe(200);
    const url = new URL(reply.body.url);
    expect(url.pathname).toBe(`/renditions/${project.id}/${file.id}`);
    expect(new Date(reply.body.expires_at).getTime()).toBeGreaterThan(Date.now() + 590_000);

    const served = await get(url.href);
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('image/webp');
    expect(served.headers.get('cache-control')).toMatch(/^public, max-age=(59\d|600), immutable$/);
    const meta = await sharp(served.bytes).metadata();
    expect([meta.width, meta.height, meta.exif]).toEqual([60, 120, undefined]);

    // A browser revalidating its copy: 304 with the headers a cache needs, no bytes.
    const etag = served.headers.get('etag')!;
    const revalidated = await get(url.href, { 'if-none-match': etag });
    expect(revalidated.status).toBe(304);
    expect(revalidated.headers.get('etag')).toBe(etag);
    expect(revalidated.headers.get('cache-control')).toMatch(/^public, max-age=\d+, immutable$/);

    const tampered = new URL(url.href);
    tampered.searchParams.set('width', '2000');
    expect((await get(tampered.href)).status).toBe(403);
    // The signature is checked before the copy: a tampered URL is refused however current the copy.
    expect((await get(tampered.href, { 'if-none-match': etag })).status).toBe(403);
    const unsigned = new URL(url.href);
    unsigned.searchParams.delete('sig');
    expect((await get(unsigned.href)).status).toBeGreaterThanOrEqual(400);
    const otherFile = new URL(
      url.href.replace(file.id, (await stored(project, 'x.png', 'image/png', await translucentPng())).id),
    );
    expect((await get(otherFile.href)).status).toBe(403);

    // Without rendition parameters it is still the original's download URL.
    const plain = await project.call('GET', `/files/${file.id}/download`);
    expect(new URL(plain.body.url).pathname.startsWith('/renditions/')).toBe(false);
  });

  it('resolves format=auto from the Accept of the request that follows the URL', async () => {
    const file = await stored(project, 'negotiated.png', 'image/png', await translucentPng());
    const reply = await project.call('GET', `/files/${file.id}/download?width=30`);
    const webp = await get(reply.body.url, { accept: 'image/webp,*/*' });
    expect(webp.headers.get('content-type')).toBe('image/webp');
    expect(webp.headers.get('vary')).toBe('Accept');
    const png = await get(reply.body.url, { accept: '*/*' });
    expect(png.headers.get('content-type')).toBe('image/png');
  });
});

describe('a stored rendition through its presigned URL', () => {
  it('is sent from the store, marked used off the request, and stops with its file at once', async () => {
    const { db, renditions } = coffer.services;
    const file = await stored(project, 'served.png', 'image/png', await translucentPng());
    const reply = await project.call('GET', `/files/${file.id}/download?width=48`);
    const url = reply.body.url as string;
    const made = await get(url, { accept: '*/*' });
    expect(made.status).toBe(200);
    await renditions.stored();
    const [row] = await db.query<{ key: string }>('SELECT key FROM renditions WHERE file_id = $1', [file.id]);
    // Uses noted by earlier tests written now, so that no flush timer of theirs fires in the middle of this one.
    await renditions.flushUses();
    await db.query(`UPDATE renditions SET last_used_at = now() - interval '2 hours' WHERE key = $1`, [
      row!.key,
    ]);
    const lastUsed = async () =>
      (
        await db.query<{ recent: boolean }>(
          `SELECT last_used_at > now() - interval '1 minute' AS recent FROM renditions WHERE key = $1`,
          [row!.key],
        )
      )[0]!.recent;

    // The same bytes from the store, and the headers alone for HEAD.
    for (let i = 0; i < 3; i++) {
      const again = await get(url, { accept: '*/*' });
      expect(again.status).toBe(200);
      expect(again.bytes.equals(made.bytes)).toBe(true);
      expect(again.headers.get('content-length')).toBe(String(made.bytes.length));
      expect(again.headers.get('etag')).toBe(made.headers.get('etag'));
    }
    const head = await fetch(url, { method: 'HEAD', headers: { accept: '*/*' } });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(made.bytes.length));
    expect(Buffer.from(await head.arrayBuffer()).length).toBe(0);
    expect(await lastUsed()).toBe(false);
    await renditions.flushUses(); // what the timer or the next eviction pass does
    expect(await lastUsed()).toBe(true);

    // Once the file was read, its rendition is read with it: one statement per request.
    const statements: string[] = [];
    const query = db.query.bind(db);
    db.query = ((sql: string, params?: unknown[]) => {
      statements.push(sql);
      return query(sql, params);
    }) as typeof db.query;
    try {
      expect((await get(url, { accept: '*/*' })).status).toBe(200);
      expect(statements).toHaveLength(1);
    } finally {
      db.query = query;
    }

    // Another content or type of the file is another rendition, though the URL's shape was seen.
    await db.query(`UPDATE files SET etag = '"other"' WHERE id = $1`, [file.id]);
    const otherContent = await get(url, { accept: '*/*' });
    expect(otherContent.status).toBe(200);
    expect(otherContent.headers.get('etag')).not.toBe(made.headers.get('etag'));
    await db.query(`UPDATE files SET content_type = 'image/jpeg' WHERE id = $1`, [file.id]);
    expect((await get(url, { accept: '*/*' })).headers.get('content-type')).toBe('image/jpeg');

    // No longer ready, then deleted: refused at once.
    await db.query(`UPDATE files SET status = 'quarantined' WHERE id = $1`, [file.id]);
    expect((await get(url, { accept: '*/*' })).status).toBe(409);
    await db.query(`UPDATE files SET status = 'ready' WHERE id = $1`, [file.id]);
    expect((await get(url, { accept: '*/*' })).status).toBe(200);
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
    expect((await get(url, { accept: '*/*' })).status).toBe(404);
  });

  it('sends a stored rendition past SMALL_BODY whole, from its own file', async () => {
    const noisy = await noise(300, 300).png().toBuffer();
    const file = await stored(project, 'noise-large.png', 'image/png', noisy);
    const reply = await project.call('GET', `/files/${file.id}/download?width=299&format=png`);
    const made = await get(reply.body.url);
    expect(made.status).toBe(200);
    expect(made.bytes.length).toBeGreaterThan(SMALL_BODY);
    await coffer.services.renditions.stored();
    const again = await get(reply.body.url);
    expect(again.status).toBe(200);
    expect(again.headers.get('content-length')).toBe(String(made.bytes.length));
    expect(again.bytes.equals(made.bytes)).toBe(true);
  });

  it('is read from the store once per process (requests together share the read), then held in memory while its row stands', async () => {
    const { db, store, renditions } = coffer.services;
    const source = await stored(project, 'held.png', 'image/png', await noise(120, 90).png().toBuffer());
    const [file] = await db.query<SourceFile>(
      'SELECT id, project_id, storage_key, etag, content_type, size_bytes FROM files WHERE id = $1',
      [source.id],
    );
    const spec = { width: 64, fit: 'cover', format: 'webp', quality: 70, animated: false } as const;
    const made = await renditions.serve(file!, spec, false, { stored: true });
    // Another process over the same database and store: it has not seen the rendition.
    const other = createRenditionService({
      db,
      store,
      images: coffer.config.images,
      secretKey: Buffer.alloc(32, 1),
      publicUrl: coffer.url,
      logger: pino({ level: 'silent' }),
    });
    const reads: string[] = [];
    const read = store.read.bind(store);
    store.read = (key, range) => {
      reads.push(key);
      return read(key, range);
    };
    try {
      // Requests arriving together share the read; the next ones are served from memory.
      const together = await Promise.all([1, 2, 3].map(() => other.serve(file!, spec, false)));
      for (const served of [...together, await other.serve(file!, spec, false)]) {
        expect(Buffer.isBuffer(served.body) && served.body.equals(made.body as Buffer)).toBe(true);
        expect(served.etag).toBe(made.etag);
      }
      expect(reads).toHaveLength(1);
      expect(reads[0]).toMatch(/^renditions\//);

      // Evicted (its row gone, as another server's eviction leaves it): made again, not served from memory.
      const [row] = await db.query<{ key: string }>(
        'DELETE FROM renditions WHERE file_id = $1 RETURNING key',
        [file!.id],
      );
      await store.delete(row!.key);
      reads.length = 0;
      const remade = await other.serve(file!, spec, false, { stored: true });
      expect(remade.etag).toBe(made.etag);
      expect(reads.filter((key) => key.startsWith('renditions/'))).toEqual([]);
      expect(await store.head(row!.key)).toMatchObject({ size: (remade.body as Buffer).length });
    } finally {
      store.read = read;
    }
  });
});

describe('bounds', () => {
  let bounded: TestCoffer;
  let boundedProject: TestProject;
  beforeAll(async () => {
    bounded = await startCoffer({
      COFFER_IMAGE_MAX_SOURCE_BYTES: '4000',
      COFFER_IMAGE_MAX_PIXELS: '250000',
      COFFER_RENDER_CONCURRENCY: '1',
    });
    boundedProject = await bounded.newProject();
  });
  afterAll(() => bounded.close());

  it('refuses sources past the byte and pixel bounds with 422 IMAGE_TOO_LARGE', async () => {
    const noisy = await noise(100, 100).png().toBuffer();
    expect(noisy.length).toBeGreaterThan(4000);
    const heavy = await stored(boundedProject, 'heavy.png', 'image/png', noisy);
    const bytes = await render(boundedProject, heavy.id, { width: 10 }, {}, bounded);
    expect(bytes.status).toBe(422);
    expect(bytes.json.error).toMatchObject({ code: 'IMAGE_TOO_LARGE', details: { max_bytes: 4000 } });

    const wide = await sharp({ create: { width: 1000, height: 300, channels: 3, background: '#000' } })
      .png()
      .toBuffer();
    expect(wide.length).toBeLessThan(4000);
    const large = await stored(boundedProject, 'wide.png', 'image/png', wide);
    const pixels = await render(boundedProject, large.id, { width: 10 }, {}, bounded);
    expect(pixels.status).toBe(422);
    expect(pixels.json.error).toMatchObject({ code: 'IMAGE_TOO_LARGE', details: { max_pixels: 250_000 } });
  });

  it('answers 503 RENDER_BUSY with Retry-After once the slots and the queue are full', async () => {
    const file = await stored(boundedProject, 'busy.png', 'image/png', await translucentPng(40, 40));
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const restore = onSourceRead(bounded, file.storage_key, () => held);
    try {
      // One slot and four places in the queue: five renders of different sizes fill them.
      const waiting = [1, 2, 3, 4, 5].map((width) => render(boundedProject, file.id, { width }, {}, bounded));
      for (let tries = 0; bounded.services.renditions.load().queued < 4; tries++) {
        expect(tries).toBeLessThan(200);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const refused = await render(boundedProject, file.id, { width: 6 }, {}, bounded);
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.json.error.code).toBe('RENDER_BUSY');
      release();
      expect((await Promise.all(waiting)).map((reply) => reply.status)).toEqual([200, 200, 200, 200, 200]);
    } finally {
      release();
      restore();
    }
  });
});

describe('the render deadline', () => {
  let limited: TestCoffer;
  let limitedProject: TestProject;
  beforeAll(async () => {
    limited = await startCoffer({ COFFER_RENDER_TIMEOUT_SECONDS: '1', COFFER_RENDER_CONCURRENCY: '1' });
    limitedProject = await limited.newProject();
  });
  afterAll(() => limited.close());

  it('stops a render that runs past COFFER_RENDER_TIMEOUT_SECONDS with 422 IMAGE_TOO_LARGE, then renders again', async () => {
    // The slowest render the API takes: AVIF at the largest size and quality, whose encoder libvips
    // cannot interrupt (it runs for many seconds on any machine), from a small 4096 × 4096 PNG.
    const large = await sharp({ create: { width: 4096, height: 4096, channels: 3, background: '#808080' } })
      .png()
      .toBuffer();
    const file = await stored(limitedProject, 'large.png', 'image/png', large);
    const slow = { width: 4096, height: 4096, fit: 'fill', format: 'avif', quality: 100 };
    const stopped = await render(limitedProject, file.id, slow, {}, limited);
    expect(stopped.status).toBe(422);
    expect(stopped.json.error).toMatchObject({ code: 'IMAGE_TOO_LARGE', details: { timeout_seconds: 1 } });

    // Its render slot is free, the server healthy, and the next renders are made.
    expect(limited.services.renditions.load()).toEqual({ running: 0, queued: 0 });
    expect((await limited.call('GET', '/health/live')).status).toBe(200);
    const small = await stored(limitedProject, 'small.png', 'image/png', await translucentPng());
    for (const format of ['avif', 'webp']) {
      const again = await render(limitedProject, small.id, { width: 50, format }, {}, limited);
      expect(again.status).toBe(200);
      expect(again.headers.get('content-type')).toBe(`image/${format}`);
      expect(await sharp(again.bytes).metadata()).toMatchObject({ width: 50, height: 25 });
    }
  });
});

describe('the rendition cache budget', () => {
  it('removes the least recently used renditions once the total is past COFFER_RENDITION_CACHE_BYTES', async () => {
    const { db } = coffer.services;
    const total = async () =>
      (
        await db.query<{ total: number }>(
          'SELECT coalesce(sum(size_bytes), 0)::bigint AS total FROM renditions',
        )
      )[0]!.total;
    // Room for what this worker's database holds already, and two renditions of about 4.8 kB.
    const budgeted = await startCoffer({ COFFER_RENDITION_CACHE_BYTES: String((await total()) + 12_000) });
    try {
      const target = await budgeted.newProject();
      const noisy = await noise(100, 100).png().toBuffer();
      const file = await stored(target, 'noise.png', 'image/png', noisy);
      const keyOf = async (width: number) => {
        const reply = await render(target, file.id, { width, format: 'png' }, {}, budgeted);
        expect(reply.status).toBe(200);
        expect(reply.bytes.length).toBeGreaterThan(3000);
        expect(reply.bytes.length).toBeLessThan(6000);
        await budgeted.services.renditions.stored();
        const rows = await db.query<{ key: string }>(
          'SELECT key FROM renditions WHERE file_id = $1 ORDER BY created_at DESC LIMIT 1',
          [file.id],
        );
        return rows[0]!.key;
      };
      const a = await keyOf(40);
      const b = await keyOf(41);
      // A was used two hours ago, B one hour ago; then A is used again.
      await db.query(`UPDATE renditions SET last_used_at = now() - interval '2 hours' WHERE key = $1`, [a]);
      await db.query(`UPDATE renditions SET last_used_at = now() - interval '1 hour' WHERE key = $1`, [b]);
      expect((await render(target, file.id, { width: 40, format: 'png' }, {}, budgeted)).status).toBe(200);
      const c = await keyOf(42);

      const remaining = async () =>
        (await db.query<{ key: string }>('SELECT key FROM renditions WHERE file_id = $1', [file.id])).map(
          (row) => row.key,
        );
      for (let tries = 0; (await remaining()).includes(b); tries++) {
        expect(tries).toBeLessThan(100);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await remaining()).sort()).toEqual([a, c].sort());
      expect(await budgeted.services.store.head(b)).toBeUndefined();
      expect(await budgeted.services.store.head(a)).toBeDefined();
      // B is made again when asked for.
      expect((await render(target, file.id, { width: 41, format: 'png' }, {}, budgeted)).status).toBe(200);
    } finally {
      await budgeted.close();
    }
  });
});

describe('eager thumbnails (project setting thumbnails)', () => {
  const jobsOf = (fileId: string) =>
    coffer.services.db.query<{ kind: string }>(
      "SELECT kind FROM jobs WHERE file_id = $1 AND kind = 'thumbnail'",
      [fileId],
    );
  async function runThumbnails(fileId: string) {
    const { thumbnailer } = coffer.services;
    for (let pass = 0; (await jobsOf(fileId)).length > 0; pass++) {
      expect(pass).toBeLessThan(50);
      await thumbnailer.runOnce();
      await thumbnailer.settle();
    }
  }

  it('makes the listed renditions when an image becomes ready, every negotiable format for auto', async () => {
    const target = await coffer.newProject({
      thumbnails: [
        { width: 64, format: 'webp' },
        { width: 32, height: 32, fit: 'cover' },
      ],
    });
    const settings = (await coffer.call('GET', `/v1/projects/${target.id}`, { token: target.key })).body
      .settings;
    expect(settings.thumbnails).toHaveLength(2);
    const file = await stored(target, 'thumbs.png', 'image/png', await translucentPng());
    expect(await jobsOf(file.id)).toEqual([{ kind: 'thumbnail' }]);
    await runThumbnails(file.id);
    const types = await coffer.services.db.query<{ content_type: string }>(
      'SELECT content_type FROM renditions WHERE file_id = $1 ORDER BY content_type',
      [file.id],
    );
    expect(types.map((row) => row.content_type)).toEqual([
      'image/avif',
      'image/png',
      'image/webp',
      'image/webp',
    ]);

    // The first request finds it made: the source is not read.
    let sourceReads = 0;
    const restore = onSourceRead(coffer, file.storage_key, () => sourceReads++);
    try {
      const reply = await render(target, file.id, { width: 32, height: 32 }, { accept: 'image/webp,*/*' });
      expect(reply.headers.get('content-type')).toBe('image/webp');
      expect(sourceReads).toBe(0);
    } finally {
      restore();
    }
  });

  it('never fails the file when a thumbnail cannot be made, and queues none for projects without the setting', async () => {
    const target = await coffer.newProject({ thumbnails: [{ width: 16 }] });
    const jpeg = await sharp({ create: { width: 300, height: 300, channels: 3, background: '#123456' } })
      .jpeg()
      .toBuffer();
    const broken = await stored(target, 'broken.jpg', 'image/jpeg', jpeg.subarray(0, 200));
    await runThumbnails(broken.id);
    expect((await target.call('GET', `/files/${broken.id}`)).body.status).toBe('ready');
    expect(
      await coffer.services.db.query('SELECT key FROM renditions WHERE file_id = $1', [broken.id]),
    ).toEqual([]);

    const plain = await stored(project, 'plain.png', 'image/png', await translucentPng());
    expect(await jobsOf(plain.id)).toEqual([]);
  });

  it('validates the setting', async () => {
    const target = await coffer.newProject();
    const patch = (thumbnails: unknown) =>
      coffer.call('PATCH', `/v1/projects/${target.id}`, {
        token: ADMIN_KEY,
        body: { settings: { thumbnails } },
      });
    expect((await patch(Array.from({ length: 9 }, () => ({ width: 10 })))).status).toBe(422);
    expect((await patch([{ width: 5000 }])).status).toBe(422);
    expect((await patch([{ width: 10, colour: 'red' }])).status).toBe(400);
    const cleared = await patch(null);
    expect(cleared.status).toBe(200);
    expect(cleared.body.settings.thumbnails).toBeNull();
  });
});
