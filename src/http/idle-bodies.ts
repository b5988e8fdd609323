import type { ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { closeWith, type RawAnswer } from './error-handler.ts';

/**
 * How long a request body may go without a byte while the server waits for one (tests shorten it).
 * A link that dies without closing (no FIN or RST: a phone that lost its network) sends nothing more
 * and leaves its socket open for ever; past this it is taken for dead, as S3's RequestTimeout and
 * tusd's network timeout take it.
 */
export const bodyTimes = { idleMs: 60_000 };

/** How often waiting bodies are looked at: one is ended at most this much past its bound. */
const TICK_MS = 1000;

/** What a request whose body went idle is answered, in its dialect; nothing to close it unanswered. */
export type IdleAnswer = (request: FastifyRequest, seconds: number) => RawAnswer | undefined;

/**
 * Ends every request whose body received no byte for `bodyTimes.idleMs` while the server was waiting
 * for one: its answer (`answerOf`) goes straight onto the socket, which is then closed, so that its
 * handler sees a dropped connection and keeps nothing half-written, as for any drop. Time the server
 * spends not reading (a body left buffered, its socket paused by backpressure while the store
 * works, 100 Continue not yet sent) is never the client's. Once a request's body arrived whole, or
 * it was answered (the rest of a refused body is drained within bounds: refused-body.ts), it is free.
 */
export function endIdleBodies(app: FastifyInstance, answerOf: IdleAnswer): void {
  const waiting = new Map<
    FastifyRequest,
    { reply: FastifyReply; bytes: number; at: number; awaiting: boolean }
  >();
  let timer: NodeJS.Timeout | undefined;

  const tick = () => {
    // A monotonic clock: a jump of the system's clock never takes a pause for a dead link.
    const now = performance.now();
    for (const [request, seen] of waiting) {
      const { raw } = request;
      const { socket } = raw;
      if (raw.complete || raw.destroyed || socket.destroyed || seen.reply.raw.headersSent) {
        waiting.delete(request);
        continue;
      }
      const awaiting = awaitingClient(request, seen.reply);
      if (socket.bytesRead !== seen.bytes || !awaiting || !seen.awaiting) {
        // Counted from the first look that finds the server waiting: before it (a 100 Continue sent
        // since the last look, a pause just ended) the time is not the client's.
        seen.bytes = socket.bytesRead;
        seen.at = now;
        seen.awaiting = awaiting;
      } else if (now - seen.at >= bodyTimes.idleMs) {
        waiting.delete(request);
        const seconds = bodyTimes.idleMs / 1000;
        request.log.info(
          { method: request.method, path: request.url.split('?')[0], idle_seconds: seconds },
          'request body stopped arriving: connection closed',
        );
        const answer = answerOf(request, seconds);
        // Only its own answer: behind an earlier request of the connection still answering (pipelined),
        // it would be read as that one's.
        closeWith(socket, onTheWire(socket) === seen.reply.raw ? answer : undefined);
      }
    }
    if (waiting.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  app.addHook('onRequest', (request, reply, done) => {
    const { raw } = request;
    // Only a connection's (an injected request has none), and only one that announced a body.
    const announced =
      raw.headers['transfer-encoding'] !== undefined || Number(raw.headers['content-length']) > 0;
    if (announced && !raw.complete && raw.socket instanceof Socket) {
      waiting.set(request, { reply, bytes: raw.socket.bytesRead, at: performance.now(), awaiting: false });
      timer ??= setInterval(tick, TICK_MS).unref();
    }
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearInterval(timer);
    waiting.clear();
    done();
  });
}

/** The response a connection is sending, or about to: its current request's (node:_http_server). */
const onTheWire = (socket: Socket) => (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;

/**
 * Whether the server is waiting for the client's bytes: it left none unread, its socket is not paused
 * by backpressure, and a client that expects 100 Continue was sent it (before, it waits for us; Node
 * expects it of HTTP/1.1 clients only).
 */
function awaitingClient(request: FastifyRequest, reply: FastifyReply): boolean {
  const { raw } = request;
  if (raw.readableLength > 0 || raw.socket.isPaused()) return false;
  const response = reply.raw as ServerResponse & { _expect_continue?: boolean; _sent100?: boolean };
  return response._expect_continue !== true || response._sent100 === true;
}
