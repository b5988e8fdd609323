/**
 * The smallest HTTP object server doing the same work as Coffer's local store on a transfer, with no
 * framework, signature, database or sidecar: PUT /<name> streams the body into a file while hashing it
 * (SHA-256), fsyncs it and answers {size, sha256}; GET /<name> streams the file back; GET / answers 204
 * at once (an HTTP round trip and nothing else); GET /<name>?render=<quality> answers the file, a JPEG,
 * as a 400 px WebP of that quality made by sharp from its path (as Coffer reads a source), so that a
 * render behind HTTP and nothing else can be timed. Started by
 * bench/helper-servers.ts (startReference) as a child process, so that it gets a core of its own as Coffer does;
 * it shows how much of a gap to raw disk is the platform's (loopback HTTP in Node.js) rather than Coffer's.
 *
 * Environment: PORT, BENCH_REFERENCE_DIR (the folder of its files).
 */
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { SharpConstructor } from 'sharp';

const BUFFER_SIZE = 1024 * 1024;
/** sharp, loaded with the first render: the other benchmarks' reference holds no image library. */
let sharpLoaded: Promise<SharpConstructor> | undefined;
const dir = process.env.BENCH_REFERENCE_DIR ?? '';
const port = Number(process.env.PORT);

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://reference');
  const name = url.pathname.slice(1);
  if (name === '' && request.method === 'GET') {
    response.writeHead(204).end();
    return;
  }
  if (!/^[a-z0-9-]{1,64}$/.test(name)) {
    response.writeHead(400).end();
    return;
  }
  const path = join(dir, name);
  const quality = url.searchParams.get('render');
  if (quality !== null && request.method === 'GET') {
    sharpLoaded ??= import('sharp').then(({ default: sharp }) => {
      // As Coffer runs it: libvips' operation cache off.
      sharp.cache(false);
      return sharp;
    });
    const sharp = await sharpLoaded;
    const image = await sharp(path, { autoOrient: true })
      .resize({ width: 400 })
      .webp({ quality: Number(quality) })
      .toBuffer();
    response.writeHead(200, { 'content-type': 'image/webp', 'content-length': String(image.length) });
    response.end(image);
    return;
  }
  if (request.method === 'PUT') {
    const file = await open(path, 'wx');
    const hash = createHash('sha256');
    let size = 0;
    await pipeline(
      async function* () {
        for await (const chunk of request as AsyncIterable<Buffer>) {
          size += chunk.length;
          hash.update(chunk);
          yield chunk;
        }
      },
      file.createWriteStream({ flush: true, highWaterMark: BUFFER_SIZE }),
    );
    response.end(JSON.stringify({ size, sha256: hash.digest('hex') }));
  } else if (request.method === 'GET') {
    const file = await open(path, 'r');
    const { size } = await file.stat();
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
    await pipeline(file.createReadStream({ highWaterMark: BUFFER_SIZE }), response);
  } else {
    response.writeHead(405).end();
  }
}

const server = createServer((request, response) => {
  handle(request, response).catch((error: unknown) => {
    if (!response.headersSent) response.writeHead(500);
    response.end(String(error));
  });
});
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
