import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ADMIN_KEY } from '../support/coffer.ts';
import { translucentPng } from '../support/images.ts';
import { coffer, onSourceRead, project, render, serveRenditions, stored } from '../support/renditions.ts';

serveRenditions();

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
