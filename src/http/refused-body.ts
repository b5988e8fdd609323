import type { IncomingMessage, ServerResponse } from 'node:http';
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
 * `Connection: close` on a body past its limit gives way to the same bounds, on a connection Node
 * would keep open: on one it closes anyway, the answer still says so.
 */
export function drainRefusedBodies(app: FastifyInstance, bounds: DrainBounds = DRAIN_BOUNDS): void {
  app.addHook('onSend', async (request, reply) => {
    const closing = reply.getHeader('connection') === 'close';
    if (closing && !request.raw.complete && keptOpen(reply.raw)) reply.removeHeader('connection');
  });
  app.addHook('onResponse', async (request) => drainRest(request.raw, bounds));
}

/**
 * Whether Node keeps the connection of `response` open once it is sent: not for a client that asked
 * to close it or speaks HTTP/1.0, past the connection's most requests, nor for one that expected 100
 * Continue and was answered without it (node:_http_outgoing's and node:_http_server's own tests).
 */
function keptOpen(response: ServerResponse): boolean {
  const state = response as ServerResponse & {
    shouldKeepAlive?: boolean;
    maxRequestsOnConnectionReached?: boolean;
    _expect_continue?: boolean;
    _sent100?: boolean;
  };
  const unansweredContinue = state._expect_continue === true && state._sent100 !== true;
  return (
    state.shouldKeepAlive === true && state.maxRequestsOnConnectionReached !== true && !unansweredContinue
  );
}

/** How often the bytes a drain took in are looked at: a bound is passed by at most this long's worth. */
const TICK_MS = 20;

function drainRest(request: IncomingMessage, bounds: DrainBounds): void {
  const { socket } = request;
  // Only a connection: an injected request (app.inject) has none. And not one Node closes anyway (a
  // refused 100-continue, whose client was never asked for its body).
  if (!(socket instanceof Socket) || socket.destroyed || socket.writableEnded) return;
  if (request.complete || request.destroyed) return;
  // Counted on the socket: the rest of a body Node drops is never pushed to the request.
  const start = { bytes: socket.bytesRead, at: Date.now() };
  const watch = setInterval(() => {
    if (socket.bytesRead - start.bytes <= bounds.bytes && Date.now() - start.at <= bounds.ms) return;
    stop();
    socket.destroy();
  }, TICK_MS).unref();
  const stop = () => {
    clearInterval(watch);
    request.off('end', stop);
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
