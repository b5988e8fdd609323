import { rename } from 'node:fs/promises';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { SMALL_BODY } from '../../src/infra/storage/local/files.ts';
import { isLocalStore } from '../../src/infra/storage/local/store.ts';
import { storage } from '../support/backends.ts';
import { initiate } from '../support/files.ts';
import {
  animatedGif,
  bombPng,
  hasGps,
  noise,
  sidewaysJpegWithGps,
  translucentPng,
} from '../support/images.ts';
import { coffer, project, render, serveRenditions, stored } from '../support/renditions.ts';

serveRenditions();

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
});
