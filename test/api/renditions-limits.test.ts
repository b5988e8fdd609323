import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { noise, translucentPng } from '../support/images.ts';
import { onSourceRead, render, stored } from '../support/renditions.ts';

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
