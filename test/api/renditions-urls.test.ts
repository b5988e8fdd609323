import pino from 'pino';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { SMALL_BODY } from '../../src/infra/storage/local/files.ts';
import { createRenditionService, type SourceFile } from '../../src/modules/renditions/service.ts';
import { noise, sidewaysJpegWithGps, translucentPng } from '../support/images.ts';
import { coffer, get, project, serveRenditions, stored } from '../support/renditions.ts';

serveRenditions();

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
