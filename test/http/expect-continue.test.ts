import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { continueOnRead } from '../../src/http/expect-continue.ts';
import { Exchange } from '../support/exchange.ts';

/** How a handler reads a request body, each way a stream is read. */
const READERS: Record<string, (request: IncomingMessage) => Promise<Buffer>> = {
  "on('data')": (request) =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => resolve(Buffer.concat(chunks)));
      request.on('error', reject);
    }),
  "on('readable') and read()": (request) =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      request.on('readable', () => {
        for (let chunk = request.read(); chunk !== null; chunk = request.read()) chunks.push(chunk);
      });
      request.on('end', () => resolve(Buffer.concat(chunks)));
      request.on('error', reject);
    }),
  'async iteration': async (request) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  },
  'pipeline()': async (request) => {
    const chunks: Buffer[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk);
        done();
      },
    });
    await pipeline(request, sink);
    return Buffer.concat(chunks);
  },
  'pipe()': (request) =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const through = new PassThrough();
      through.on('data', (chunk: Buffer) => chunks.push(chunk));
      through.on('end', () => resolve(Buffer.concat(chunks)));
      request.on('error', reject);
      request.pipe(through);
    }),
};

let server: Server;
let origin = '';
let handle: (request: IncomingMessage, response: ServerResponse) => Promise<void>;
beforeAll(async () => {
  server = createServer((request, response) => void handle(request, response));
  continueOnRead(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

const BODY = Buffer.from('the body, sent once asked for');
const expecting = (length: number) => ({ 'content-length': String(length), expect: '100-continue' });

describe('100 Continue on the first read of the body', () => {
  it.each(Object.keys(READERS))('is sent when the handler reads with %s, not before', async (way) => {
    let reading = false;
    handle = async (request, response) => {
      // The request is looked at first: no 100 Continue meanwhile.
      await sleep(100);
      reading = true;
      const body = await READERS[way]!(request);
      response.end(`received ${body.length}`);
    };
    const exchange = new Exchange(origin, 'PUT', '/', expecting(BODY.length));
    const first = await exchange.next();
    expect(first.status).toBe(100);
    expect(reading).toBe(true);
    await exchange.write(BODY);
    const answer = await exchange.next();
    expect(answer).toMatchObject({ status: 200, body: `received ${BODY.length}` });
    expect(answer.headers.connection).not.toBe('close');
    exchange.close();
  });

  it('is never sent for a request answered without reading its body, even as Node then drains it', async () => {
    let refused: IncomingMessage | undefined;
    handle = async (request, response) => {
      refused = request;
      response.statusCode = 403;
      response.end('refused');
    };
    const exchange = new Exchange(origin, 'PUT', '/', expecting(5 * 1024 ** 3));
    const answer = await exchange.next();
    expect(answer).toMatchObject({ status: 403, body: 'refused' });
    expect(answer.headers.connection).toBe('close');
    await exchange.closed;
    expect(exchange.rest).toBe('');
    // Node's own read of the rest, once the answer is sent, goes as it would without Expect.
    await sleep(10);
    expect(refused!.errored).toBeNull();
  });

  it('leaves a request without Expect as it was', async () => {
    handle = async (request, response) => {
      response.end(`received ${(await READERS['async iteration']!(request)).length}`);
    };
    const exchange = new Exchange(origin, 'PUT', '/', { 'content-length': String(BODY.length) });
    await exchange.write(BODY);
    expect(await exchange.next()).toMatchObject({ status: 200, body: `received ${BODY.length}` });
    exchange.close();
  });
});
