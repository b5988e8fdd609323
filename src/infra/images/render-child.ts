import { ImageError } from './errors.ts';
import { renderInProcess } from './render.ts';

/**
 * A child process of the render pool (render-pool.ts): renders what it is sent, one at a time, and
 * answers the image or the ImageError. It says `ready` once sharp is loaded; it leaves with its parent.
 */

const send = (message: unknown) => process.send!(message);
const bytes = (data: Uint8Array) => Buffer.from(data.buffer, data.byteOffset, data.byteLength);

process.on('message', async (request: { source: Uint8Array; spec: never; limits: never }) => {
  try {
    const { data, width, height } = await renderInProcess(
      bytes(request.source),
      request.spec,
      request.limits,
    );
    send({ data, width, height });
  } catch (error) {
    const known = error instanceof ImageError ? error : undefined;
    send({
      error: {
        code: known?.code ?? 'NotAnImage',
        message: known?.message ?? 'The image cannot be decoded',
        details: known?.details,
      },
    });
  }
});
process.on('disconnect', () => process.exit(0));
send('ready');
