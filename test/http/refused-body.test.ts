import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DrainBounds, drainRefusedBodies } from '../../src/http/refused-body.ts';
import { type Answer, Exchange } from '../support/exchange.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const BOUNDS: DrainBounds = { bytes: MiB, ms: 1000 };

let app: FastifyInstance;
let origin = '';
beforeAll(async () => {
  app = Fastify({ bodyLimit: KiB });
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

/** The answer to the request sent after a refused one on its connection, or none within 10 s. */
const nextOn = (exchange: Exchange): Promise<Answer | undefined> =>
  Promise.race([exchange.next(), sleep(10_000).then(() => undefined)]);

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
      expect(await nextOn(exchange)).toMatchObject({ status: 200, body: 'next' });
      // Drained within the bounds, the connection outlives them.
      await sleep(BOUNDS.ms + 200);
      await exchange.write(NEXT);
      const later = await nextOn(exchange);
      exchange.close();
      expect(later).toMatchObject({ status: 200, body: 'next' });
    },
  );

  it.each([
    ['refused unread', '/unread', 403],
    ['refused mid-body', '/midway', 413],
  ])(
    '%s, of 1 GiB sent slowly, is answered, and its connection closed once the time bound passed',
    async (_, path, status) => {
      const exchange = new Exchange(origin, 'PUT', path, {
        'content-type': 'application/octet-stream',
        'content-length': String(GiB),
      });
      await exchange.write(Buffer.alloc(KiB));
      const answer = exchange.next();
      // 20 KiB a second: the byte bound is not reached before the time bound.
      const { sent, closed } = await sendUntilClosed(exchange, Buffer.alloc(KiB), 50, 10 * 20 * KiB);
      exchange.close();
      expect((await answer).status).toBe(status);
      expect(closed).toBe(true);
      expect(sent).toBeLessThan(10 * 20 * KiB);
    },
  );

  it.each([
    ['refused unread', '/unread', 403],
    ['refused mid-body', '/midway', 413],
  ])(
    '%s, of 1 GiB sent fast, is answered, and its connection closed past the byte bound',
    async (_, path, status) => {
      const exchange = new Exchange(origin, 'PUT', path, {
        'content-type': 'application/octet-stream',
        'content-length': String(GiB),
      });
      await exchange.write(Buffer.alloc(KiB));
      const answer = exchange.next();
      // Far less than a second's worth over loopback: the time bound is not what closes it.
      const most = 64 * MiB;
      const { sent, closed } = await sendUntilClosed(exchange, Buffer.alloc(256 * KiB), 0, most);
      exchange.close();
      expect((await answer).status).toBe(status);
      expect(closed).toBe(true);
      // What the bound let through, and what the sockets' buffers held.
      expect(sent).toBeLessThan(most);
    },
  );
});
