import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { continueOnRead } from '../../src/http/expect-continue.ts';
import { type DrainBounds, drainRefusedBodies } from '../../src/http/refused-body.ts';
import { Exchange } from '../support/exchange.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const BOUNDS: DrainBounds = { bytes: MiB, ms: 1000 };

let app: FastifyInstance;
let origin = '';
beforeAll(async () => {
  app = Fastify({ bodyLimit: KiB });
  continueOnRead(app.server);
  drainRefusedBodies(app, BOUNDS);
  // Bodies reach the handlers unread, as on Coffer's upload routes.
  app.addContentTypeParser('application/octet-stream', (_request, _payload, done) => done(null));
  app.put('/unread', async (_request, reply) => reply.code(403).send('refused unread'));
  // Refused mid-body: a reader that took its first chunk and let go, leaving its listener.
  app.put('/midway', async (request, reply) => {
    for await (const _chunk of request.raw.iterator({ destroyOnReturn: false })) break;
    return reply.code(413).send('refused midway');
  });
  app.post('/json', async () => 'parsed');
  app.get('/next', async () => 'next');
  await app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(() => app.close());

const NEXT = Buffer.from('GET /next HTTP/1.1\r\nhost: coffer\r\n\r\n');

/** Writes `chunk` after `chunk` until the server closes the connection or `most` bytes went: how many did. */
async function sendUntilClosed(exchange: Exchange, chunk: Buffer, pause: number, most: number) {
  let closed = false;
  void exchange.closed.then(() => {
    closed = true;
  });
  let sent = 0;
  while (!closed && sent < most) {
    // A write that stays unfinished for 5 s: the server stopped reading without closing.
    const written = exchange.write(chunk).then(
      () => true,
      () => false,
    );
    if (!(await Promise.race([written, sleep(5000).then(() => false)]))) break;
    sent += chunk.length;
    if (pause) await sleep(pause);
  }
  await Promise.race([exchange.closed, sleep(5000)]);
  return { sent, closed };
}

describe('a body answered before its end', () => {
  it.each([
    ['refused mid-body', 'PUT', '/midway', 'application/octet-stream', 413],
    ['past the body limit', 'POST', '/json', 'application/json', 413],
  ])(
    '%s, small, is read through: the next request on its connection is answered',
    async (_, method, path, type, status) => {
      // More than one read of the socket takes in, and than a request buffers: the rest waits for a reader.
      const body = Buffer.alloc(BOUNDS.bytes / 2, 'x');
      const exchange = new Exchange(origin, method, path, {
        'content-type': type,
        'content-length': String(body.length),
      });
      await exchange.write(body.subarray(0, KiB));
      const refused = await exchange.next();
      expect(refused.status).toBe(status);
      expect(refused.headers.connection).not.toBe('close');
      // The rest, then the next request, as a keep-alive client sends them.
      await exchange.write(Buffer.concat([body.subarray(KiB), NEXT]));
      expect(await exchange.nextWithin(10_000)).toMatchObject({ status: 200, body: 'next' });
      // Drained within the bounds, the connection outlives them.
      await sleep(BOUNDS.ms + 200);
      await exchange.write(NEXT);
      const later = await exchange.nextWithin(10_000);
      exchange.close();
      expect(later).toMatchObject({ status: 200, body: 'next' });
    },
  );

  it('past the body limit and never asked for with 100 Continue, is answered as closing its connection', async () => {
    const exchange = new Exchange(origin, 'POST', '/json', {
      'content-type': 'application/json',
      'content-length': String(4 * KiB),
      expect: '100-continue',
    });
    const refused = await exchange.next();
    expect(refused.status).toBe(413);
    // Node closes a connection whose client was answered without 100 Continue: the answer says so.
    expect(refused.headers.connection).toBe('close');
    await Promise.race([exchange.closed, sleep(5000)]);
    exchange.close();
  });

  // Slowly, 20 KiB a second: the byte bound is not reached before the time bound. Fast, far less than a
  // second's worth over loopback: the time bound is not what closes it.
  const PACES = {
    slowly: { chunk: KiB, pause: 50, most: 200 * KiB },
    fast: { chunk: 256 * KiB, pause: 0, most: 64 * MiB },
  };
  it.each([
    ['refused unread', 'slowly', 'the time bound passed', '/unread', 403],
    ['refused mid-body', 'slowly', 'the time bound passed', '/midway', 413],
    ['refused unread', 'fast', 'the byte bound passed', '/unread', 403],
    ['refused mid-body', 'fast', 'the byte bound passed', '/midway', 413],
  ] as const)(
    '%s, of 1 GiB sent %s, is answered, and its connection closed once %s',
    async (_, pace, _bound, path, status) => {
      const exchange = new Exchange(origin, 'PUT', path, {
        'content-type': 'application/octet-stream',
        'content-length': String(GiB),
      });
      await exchange.write(Buffer.alloc(KiB));
      const answer = exchange.next();
      const { chunk, pause, most } = PACES[pace];
      const { sent, closed } = await sendUntilClosed(exchange, Buffer.alloc(chunk), pause, most);
      exchange.close();
      expect((await answer).status).toBe(status);
      expect(closed).toBe(true);
      // What the bound let through, what the sockets' buffers held and what came while it was looked at.
      expect(sent).toBeLessThan(most);
    },
  );
});
