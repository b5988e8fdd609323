import type { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** How much of a body answered before its end is read and dropped, and for how long. */
export interface DrainBounds {
  bytes: number;
  ms: number;
}

/**
 * Past 16 MiB (a few resumable-upload chunks) reading to keep one connection costs more than opening
 * another; 10 s is as long as the answer is given to reach a client that reads it only once it has
 * sent its body (as Apache's and nginx's lingering closes give it).
 */
export const DRAIN_BOUNDS: DrainBounds = { bytes: 16 * 1024 ** 2, ms: 10_000 };

/**
 * The rest of a request body whose answer came before its end (refused unread, or mid-body): once the
 * answer is sent it is read and dropped, within `bounds`. A body that ends within them leaves its
 * connection to the next request; past either, the connection is closed. Closing at once would reset
 * a client still sending, which may lose the answer before it reads it (the lingering-close problem);
 * reading to the end would take in all of a refused multi-GiB upload.
 *
 * Node drops such a rest itself when nothing began to read the body (`_dump`), without bound, and
 * leaves unread the rest of a body a handler began to read and let go of, which then holds the
 * connection. The first is left to Node and only bounded; the second is read here. Fastify's
 * `Connection: close` on a body past its limit gives way to the same bounds.
 */
export function drainRefusedBodies(app: FastifyInstance, bounds: DrainBounds = DRAIN_BOUNDS): void {
  app.addHook('onSend', async (request, reply) => {
    if (!request.raw.complete && reply.getHeader('connection') === 'close') reply.removeHeader('connection');
  });
  app.addHook('onResponse', async (request) => drainRest(request.raw, bounds));
}

/** How often the bytes a drain took in are looked at: a bound is passed by at most this long's worth. */
const TICK_MS = 20;

function drainRest(request: IncomingMessage, bounds: DrainBounds): void {
  const { socket } = request;
  // Only a connection: an injected request (app.inject) has none. And not one Node closes anyway (a
  // refused 100-continue, whose client was never asked for its body).
  if (!(socket instanceof Socket) || request.complete || request.destroyed || socket.writableEnded) return;
  // Counted on the socket: the rest of a body Node drops is never pushed to the request.
  const start = { bytes: socket.bytesRead, at: Date.now() };
  const watch = setInterval(() => {
    if (socket.bytesRead - start.bytes > bounds.bytes || Date.now() - start.at > bounds.ms) socket.destroy();
  }, TICK_MS).unref();
  const stop = () => {
    clearInterval(watch);
    socket.off('close', stop);
  };
  request.once('end', stop);
  socket.once('close', stop);
  if (request.readableFlowing) return;
  // A reader let go of mid-body may still listen for 'readable', which keeps resume() from making the
  // body flow, and may have left bytes that were announced already: they are read here, then the rest.
  const drop = () => {
    while (request.read() !== null);
  };
  request.on('readable', drop);
  drop();
}
