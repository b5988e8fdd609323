import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import type { Caller } from '../../src/domain/principal.ts';
import { createRenditionService } from '../../src/modules/renditions/service.ts';
import { translucentPng } from '../support/images.ts';
import { sleep } from '../support/processes.ts';
import { coffer, onSourceRead, project, render, serveRenditions, stored } from '../support/renditions.ts';

serveRenditions();

describe('GET …/render', () => {
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
});
