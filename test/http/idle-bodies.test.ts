import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonAnswer } from '../../src/http/error-handler.ts';
import { continueOnRead } from '../../src/http/expect-continue.ts';
import { bodyTimes, endIdleBodies } from '../../src/http/idle-bodies.ts';
import { backend } from '../support/backends.ts';
import { Exchange } from '../support/exchange.ts';

const MiB = 1024 ** 2;
const IDLE_MS = 1000;

let app: FastifyInstance;
let origin = '';
/** How each request's handler saw its body end: the bytes it read, or the error it read. */
const outcomes = new Map<string, number | string>();

async function readAll(request: FastifyRequest): Promise<number> {
  let bytes = 0;
  try {
    for await (const chunk of request.raw) bytes += (chunk as Buffer).length;
  } catch (error) {
    outcomes.set(request.headers['x-name'] as string, (error as Error).message);
    throw error;
  }
  outcomes.set(request.headers['x-name'] as string, bytes);
  return bytes;
}

const { idleMs } = bodyTimes;
beforeAll(async () => {
  bodyTimes.idleMs = IDLE_MS;
  app = Fastify();
  continueOnRead(app.server);
  endIdleBodies(app, (request, seconds) =>
    jsonAnswer(408, 'BAD_REQUEST', `No byte of the request body arrived for ${seconds} s`, request.id),
  );
  app.addContentTypeParser('application/octet-stream', (_request, _payload, done) => done(null));
  app.put('/read', async (request) => ({ bytes: await readAll(request) }));
  // Reads the body only after a while longer than the bound: the server's wait, not the client's.
  app.put('/late', async (request) => {
    await sleep(IDLE_MS * 3);
    return { bytes: await readAll(request) };
  });
  // Reads the first chunk, then waits longer than the bound (a store slow to take bytes) before the rest.
  app.put('/pause', async (request) => {
    let bytes = 0;
    for await (const chunk of request.raw.iterator({ destroyOnReturn: false })) {
      if (bytes === 0) await sleep(IDLE_MS * 3);
      bytes += (chunk as Buffer).length;
    }
    return { bytes };
  });
  // Refuses the body unread.
  app.put('/refuse', async (_request, reply) => reply.code(413).send({ refused: true }));
  app.get('/next', async () => ({ next: true }));
  app.get('/wait', async () => {
    await sleep(IDLE_MS * 3);
    return { waited: true };
  });
  // Works on the whole body for longer than the bound before it answers.
  app.put('/slow', async (request) => {
    const bytes = await readAll(request);
    await sleep(IDLE_MS * 2);
    return { bytes };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  bodyTimes.idleMs = idleMs;
  await app.close();
});

const open = (path: string, name: string, length: number, extra: Record<string, string> = {}) =>
  new Exchange(origin, 'PUT', path, {
    'content-type': 'application/octet-stream',
    'content-length': String(length),
    'x-name': name,
    ...extra,
  });

/** Expects the answer of `exchange` to say its handler read `bytes` bytes. */
async function expectRead(exchange: Exchange, bytes: number) {
  const answer = await exchange.next();
  expect(answer.status).toBe(200);
  expect(JSON.parse(answer.body)).toEqual({ bytes });
}

// A bare server, without Coffer's database: once, on the embedded run.
describe.skipIf(backend !== 'embedded')('a request body that stops arriving', () => {
  it('is answered once no byte came for the bound, its connection closed and its handler cut', async () => {
    const exchange = open('/read', 'stalled', 2 * MiB);
    await exchange.write(Buffer.alloc(MiB));
    const started = performance.now();
    const answer = await exchange.next();
    expect(performance.now() - started).toBeGreaterThanOrEqual(IDLE_MS - 100);
    expect(answer.status).toBe(408);
    expect(answer.headers.connection).toBe('close');
    const { error } = JSON.parse(answer.body) as {
      error: { code: string; message: string; request_id: string };
    };
    expect(error.code).toBe('BAD_REQUEST');
    expect(error.message).toBe(`No byte of the request body arrived for ${IDLE_MS / 1000} s`);
    expect(answer.headers['x-request-id']).toBe(error.request_id);
    await exchange.closed;
    await expect.poll(() => outcomes.get('stalled')).toBe('aborted');
  });

  it('is left alone while bytes keep coming, however slowly', async () => {
    const exchange = open('/read', 'trickle', 8);
    for (let sent = 0; sent < 8; sent += 1) {
      await exchange.write(Buffer.alloc(1));
      await sleep(IDLE_MS / 3);
    }
    await expectRead(exchange, 8);
  });

  it('is left alone while the server does not read it, the client held back by backpressure', async () => {
    const exchange = open('/late', 'unread', 8 * MiB);
    // More than the connection buffers: the client waits on the server, which reads only later.
    void exchange.write(Buffer.alloc(8 * MiB));
    await expectRead(exchange, 8 * MiB);
  });

  it('is left alone while a handler that began to read it waits on something slower', async () => {
    const exchange = open('/pause', 'paused', 8 * MiB);
    void exchange.write(Buffer.alloc(8 * MiB));
    await expectRead(exchange, 8 * MiB);
  });

  it('is free once refused: its connection waits for the rest and then for the next request', async () => {
    const exchange = open('/refuse', 'refused', 2 * MiB);
    await exchange.write(Buffer.alloc(MiB));
    expect((await exchange.next()).status).toBe(413);
    await sleep(IDLE_MS * 3);
    await exchange.write(Buffer.alloc(MiB));
    await exchange.write(Buffer.from('GET /next HTTP/1.1\r\nhost: coffer\r\n\r\n'));
    const next = await exchange.next();
    expect(next.status).toBe(200);
    expect(JSON.parse(next.body)).toEqual({ next: true });
    exchange.close();
  });

  it('is ended without an answer of its own behind an earlier request still answering (pipelined)', async () => {
    const exchange = new Exchange(origin, 'GET', '/wait', {});
    await exchange.write(
      Buffer.from(
        `PUT /read HTTP/1.1\r\nhost: coffer\r\ncontent-type: application/octet-stream\r\n` +
          `content-length: ${2 * MiB}\r\nx-name: pipelined\r\n\r\n`,
      ),
    );
    await exchange.write(Buffer.alloc(MiB));
    // The connection closes: a 408 would have been read as the GET's answer.
    await expect(exchange.next()).rejects.toThrow(/^closed after ""$/);
  });

  it('of HTTP/1.0 with Expect: 100-continue, which Node never answers, is awaited at once', async () => {
    const exchange = new Exchange(
      origin,
      'PUT',
      '/read',
      {
        'content-type': 'application/octet-stream',
        'content-length': String(2 * MiB),
        'x-name': 'http-1.0',
        expect: '100-continue',
      },
      '1.0',
    );
    await exchange.write(Buffer.alloc(MiB));
    expect((await exchange.next()).status).toBe(408);
  });

  it('is left alone while the server has not yet asked for it with 100 Continue', async () => {
    const exchange = open('/late', 'continue', MiB, { expect: '100-continue' });
    expect((await exchange.next()).status).toBe(100);
    await exchange.write(Buffer.alloc(MiB));
    await expectRead(exchange, MiB);
  });

  it('is free once it arrived whole, however long its handler then works', async () => {
    const exchange = open('/slow', 'worked', MiB);
    await exchange.write(Buffer.alloc(MiB));
    await expectRead(exchange, MiB);
  });
});
