import { encodeAvif } from './render.ts';

/**
 * A child process of the render pool (render-pool.ts): encodes the pixels it is sent as AVIF, one
 * image at a time, and answers the bytes. It says `ready` once sharp is loaded; it leaves with its parent.
 */

type Request = Parameters<typeof encodeAvif>[0] & { quality: number };

process.on('message', async ({ quality, ...pixels }: Request) => {
  try {
    process.send!({ data: await encodeAvif(pixels, quality) });
  } catch (error) {
    process.send!({ error: error instanceof Error ? error.message : String(error) });
  }
});
process.on('disconnect', () => process.exit(0));
process.send!('ready');
