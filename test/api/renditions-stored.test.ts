import { describe, expect, it } from 'vitest';
import { startCoffer } from '../support/coffer.ts';
import { settledChecksum } from '../support/files.ts';
import { noise, translucentPng } from '../support/images.ts';
import { coffer, onSourceRead, project, render, serveRenditions, stored } from '../support/renditions.ts';

serveRenditions();

describe('GET …/render', () => {
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
