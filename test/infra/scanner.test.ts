import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createClamdScanner,
  createEicarScanner,
  createScanner,
  eicarTestFile,
  parseClamdUrl,
  parseScanReply,
  type Scanner,
  ScannerUnavailableError,
  ScanRejectedError,
} from '../../src/infra/scanner/index.ts';

const clamdUrl = process.env.COFFER_TEST_CLAMD_URL;
const MiB = 1024 * 1024;
const EICAR = eicarTestFile();

/** A stream of `bytes` cut into pieces of `size` bytes. */
function pieces(bytes: Buffer, size: number): Readable {
  return Readable.from(
    (function* () {
      for (let offset = 0; offset < bytes.length; offset += size) yield bytes.subarray(offset, offset + size);
    })(),
  );
}

/**
 * `total` bytes in chunks of `chunk` bytes (fresh buffers), made of near-misses: the EICAR string less
 * its last byte, over and over. Clean to any engine, and a trap for a sloppy matcher.
 */
function nearMisses(total: number, chunk = 100_000): Readable {
  const unit = Buffer.concat([EICAR.subarray(0, EICAR.length - 1), Buffer.from(' ')]);
  const pattern = Buffer.alloc(chunk + unit.length);
  for (let offset = 0; offset < pattern.length; offset += unit.length) unit.copy(pattern, offset);
  return Readable.from(
    (function* () {
      for (let sent = 0; sent < total; sent += chunk) {
        const start = sent % unit.length;
        yield Buffer.from(pattern.subarray(start, start + Math.min(chunk, total - sent)));
      }
    })(),
  );
}

function consumed(stream: Readable): boolean {
  return stream.destroyed || stream.readableEnded;
}

type Contract = { name: string; create: () => Scanner; largeClean: number };
const contracts: Contract[] = [{ name: 'eicar', create: createEicarScanner, largeClean: 20 * MiB }];
if (clamdUrl) {
  // Under the 24M StreamMaxLength that .ci/clamd.sh configures.
  contracts.push({
    name: 'clamd',
    create: () => createClamdScanner(clamdUrl, { timeoutMs: 30_000 }),
    largeClean: 8 * MiB,
  });
}

describe('the EICAR test file', () => {
  it('is the official 68-byte string', () => {
    expect(EICAR.length).toBe(68);
    expect(createHash('md5').update(EICAR).digest('hex')).toBe('44d88612fea8a8f36de82e1278abb02f');
    expect(EICAR.subarray(0, 3).toString()).toBe('X5O');
    expect(EICAR.subarray(-4).toString()).toBe('H+H*');
  });
});

describe.each(contracts)('scanner contract: $name', ({ create, largeClean }) => {
  it('finds clean bytes clean', async () => {
    const stream = Readable.from([Buffer.from('hello, world\n')]);
    await expect(create().scan(stream)).resolves.toEqual({ clean: true });
    expect(consumed(stream)).toBe(true);
  });

  it('finds an empty stream clean', async () => {
    await expect(create().scan(Readable.from([]))).resolves.toEqual({ clean: true });
  });

  it('finds the EICAR test file, with a signature name', async () => {
    const stream = Readable.from([eicarTestFile()]);
    const result = await create().scan(stream);
    expect(result.clean).toBe(false);
    expect(result.clean ? '' : result.signature).toMatch(/\S/);
    expect(consumed(stream)).toBe(true);
  });

  it.each([1, 2, 3, 7, 33, 67])('finds EICAR split into chunks of %i bytes', async (size) => {
    const result = await create().scan(pieces(eicarTestFile(), size));
    expect(result.clean).toBe(false);
  });

  it('finds EICAR in Uint8Array and string chunks', async () => {
    const text = EICAR.toString('latin1');
    const chunks = [new Uint8Array(EICAR.subarray(0, 30)), text.slice(30)];
    expect((await create().scan(Readable.from(chunks, { objectMode: true }))).clean).toBe(false);
  });

  it(`finds a large stream of near-misses clean`, async () => {
    const stream = nearMisses(largeClean);
    await expect(create().scan(stream)).resolves.toEqual({ clean: true });
    expect(stream.readableEnded).toBe(true);
  });

  it('passes an error of the input stream through', async () => {
    const failure = new Error('storage read failed');
    const stream = Readable.from(
      (async function* () {
        yield Buffer.from('some bytes');
        throw failure;
      })(),
    );
    await expect(create().scan(stream)).rejects.toBe(failure);
  });

  it('answers ping', async () => {
    await expect(create().ping(2_000)).resolves.toBeUndefined();
  });
});

describe('the EICAR scanner', () => {
  const scanner = createEicarScanner();

  it('finds EICAR anywhere in a large stream, across any chunk seam', async () => {
    const size = 3 * MiB + 12_345;
    for (const at of [0, 65_536 - 30, 2 * MiB - 1, size - EICAR.length]) {
      const bytes = Buffer.alloc(size, 'a');
      EICAR.copy(bytes, at);
      expect((await scanner.scan(pieces(bytes, 65_536))).clean, `EICAR at ${at}`).toBe(false);
      expect((await scanner.scan(pieces(bytes, 1000))).clean, `EICAR at ${at}`).toBe(false);
    }
  });

  it('stops reading once it found EICAR', async () => {
    let pulled = 0;
    const stream = Readable.from(
      (function* () {
        yield eicarTestFile();
        for (;;) {
          pulled += 1;
          yield Buffer.alloc(1024);
        }
      })(),
    );
    await expect(scanner.scan(stream)).resolves.toEqual({ clean: false, signature: 'Eicar-Test-Signature' });
    expect(stream.destroyed).toBe(true);
    expect(pulled).toBeLessThan(100);
  });

  it('finds a 67-byte prefix of EICAR clean', async () => {
    const result = await scanner.scan(pieces(EICAR.subarray(0, 67), 5));
    expect(result).toEqual({ clean: true });
  });
});

// --- the clamd client against fake daemons: these need no clamd ----------------------------------

type Request = { command: string; body: Buffer; chunkSizes: number[] };
type FakeClamd = { url: string; requests: Request[]; close(): Promise<void> };
type Answer = (request: Request, socket: Socket, server: Server) => void;
type FakeOptions = {
  /** Called once per complete request (a command, and for INSTREAM its body up to the end chunk). */
  answer: Answer;
  /** Called as INSTREAM body bytes arrive, before the request is complete. */
  onBody?: (received: number, socket: Socket, server: Server) => void;
  /** Listen on this unix socket path instead of a TCP port. */
  path?: string;
};

const fakes: FakeClamd[] = [];
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((fake) => fake.close()));
});

/** A stand-in clamd that parses the requests it gets as the real one does. */
async function fakeClamd(options: FakeOptions): Promise<FakeClamd> {
  const requests: Request[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffer = Buffer.alloc(0);
    let command: string | undefined;
    const body: Buffer[] = [];
    const chunkSizes: number[] = [];
    let received = 0;
    let done = false;
    socket.on('data', (data: Buffer) => {
      if (done) return;
      buffer = Buffer.concat([buffer, data]);
      if (command === undefined) {
        const nul = buffer.indexOf(0);
        if (nul === -1) return;
        command = buffer.subarray(0, nul).toString();
        buffer = buffer.subarray(nul + 1);
        if (command !== 'zINSTREAM') {
          done = true;
          const request = { command, body: Buffer.alloc(0), chunkSizes };
          requests.push(request);
          options.answer(request, socket, server);
          return;
        }
      }
      while (buffer.length >= 4) {
        const length = buffer.readUInt32BE(0);
        if (length === 0) {
          done = true;
          const request = { command, body: Buffer.concat(body), chunkSizes };
          requests.push(request);
          options.answer(request, socket, server);
          return;
        }
        if (buffer.length < 4 + length) break;
        body.push(buffer.subarray(4, 4 + length));
        chunkSizes.push(length);
        received += length;
        buffer = buffer.subarray(4 + length);
        options.onBody?.(received, socket, server);
        if (socket.destroyed || socket.writableEnded) {
          done = true;
          return;
        }
      }
    });
  });
  await new Promise<void>((resolve) => {
    if (options.path) server.listen(options.path, resolve);
    else server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  const url = options.path
    ? `unix:${options.path}`
    : `tcp://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const fake: FakeClamd = {
    url,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        if (server.listening) server.close(() => resolve());
        else resolve();
      }),
  };
  fakes.push(fake);
  return fake;
}

/** Answers like a clamd whose only signature is EICAR (and PING with PONG). */
const likeClamd: Answer = (request, socket) => {
  if (request.command === 'zPING') socket.end('PONG\0');
  else socket.end(request.body.includes(EICAR) ? 'stream: Eicar-Signature FOUND\0' : 'stream: OK\0');
};

/** A TCP port on which nothing listens. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address ? address.port : 0;
}

async function elapsed<T>(promise: Promise<T>): Promise<[PromiseSettledResult<T>, number]> {
  const started = performance.now();
  const [settled] = await Promise.allSettled([promise]);
  return [settled!, performance.now() - started];
}

function reason(result: PromiseSettledResult<unknown>): unknown {
  return result.status === 'rejected' ? result.reason : undefined;
}

describe('the clamd client', () => {
  it('sends INSTREAM in chunks of at most 64 KiB and reads the verdict', async () => {
    const fake = await fakeClamd({ answer: likeClamd });
    const bytes = Buffer.alloc(200 * 1024 + 17, 'x');
    const scanner = createClamdScanner(fake.url, { timeoutMs: 5_000 });
    await expect(scanner.scan(Readable.from([bytes]))).resolves.toEqual({ clean: true });
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]!.command).toBe('zINSTREAM');
    expect(fake.requests[0]!.body.equals(bytes)).toBe(true);
    expect(fake.requests[0]!.chunkSizes).toEqual([65_536, 65_536, 65_536, 8209]);
  });

  it('reports what clamd found', async () => {
    const fake = await fakeClamd({ answer: likeClamd });
    const scanner = createClamdScanner(fake.url);
    const bytes = Buffer.concat([Buffer.alloc(100_000, 'z'), EICAR, Buffer.from('tail')]);
    await expect(scanner.scan(pieces(bytes, 4096))).resolves.toEqual({
      clean: false,
      signature: 'Eicar-Signature',
    });
  });

  it('waits for a slow answer within the timeout', async () => {
    const fake = await fakeClamd({
      answer: (_request, socket) => {
        setTimeout(() => socket.end('stream: OK\0'), 300);
      },
    });
    const scanner = createClamdScanner(fake.url, { timeoutMs: 3_000 });
    const [result, ms] = await elapsed(scanner.scan(Readable.from([Buffer.from('slow')])));
    expect(result).toEqual({ status: 'fulfilled', value: { clean: true } });
    expect(ms).toBeGreaterThanOrEqual(250);
  });

  it('gives up on a daemon that never answers after the timeout', async () => {
    const fake = await fakeClamd({ answer: () => {} });
    const stream = Readable.from([Buffer.from('never answered')]);
    const [result, ms] = await elapsed(createClamdScanner(fake.url, { timeoutMs: 300 }).scan(stream));
    expect(reason(result)).toBeInstanceOf(ScannerUnavailableError);
    expect(String(reason(result))).toMatch(/no answer within 300 ms/);
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(2_000);
    expect(stream.destroyed || stream.readableEnded).toBe(true);
  });

  it('times out while the daemon stops reading the stream', async () => {
    // Reads nothing at all: the client fills the socket's buffers and waits for 'drain' in vain.
    const server = createServer((socket) => socket.pause());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const stream = nearMisses(64 * MiB);
      const [result, ms] = await elapsed(
        createClamdScanner(`tcp://127.0.0.1:${port}`, { timeoutMs: 500 }).scan(stream),
      );
      expect(reason(result)).toBeInstanceOf(ScannerUnavailableError);
      expect(ms).toBeLessThan(3_000);
      expect(stream.destroyed).toBe(true);
    } finally {
      server.close();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
  });

  it('fails fast when nothing listens', async () => {
    const port = await closedPort();
    const scanner = createClamdScanner(`tcp://127.0.0.1:${port}`, { timeoutMs: 10_000 });
    const [result, ms] = await elapsed(scanner.scan(Readable.from([Buffer.from('x')])));
    expect(reason(result)).toBeInstanceOf(ScannerUnavailableError);
    expect(String(reason(result))).toMatch(/ECONNREFUSED/);
    expect(ms).toBeLessThan(1_000);
    await expect(scanner.ping(1_000)).rejects.toBeInstanceOf(ScannerUnavailableError);
  });

  it('fails fast when the unix socket does not exist', async () => {
    const scanner = createClamdScanner('/nonexistent/coffer/clamd.sock');
    await expect(scanner.scan(Readable.from([Buffer.from('x')]))).rejects.toBeInstanceOf(
      ScannerUnavailableError,
    );
  });

  it.each([
    ['INSTREAM size limit exceeded. ERROR\0', ScanRejectedError],
    ["stream: Can't allocate memory ERROR\0", ScannerUnavailableError],
    ['stream: Heuristics.Limits.Exceeded.MaxFileSize FOUND\0', ScanRejectedError],
    ['UNKNOWN COMMAND\0', ScannerUnavailableError],
    ['\0', ScannerUnavailableError],
  ])('maps the answer %j', async (answer, expected) => {
    const fake = await fakeClamd({ answer: (_request, socket) => socket.end(answer) });
    const scanner = createClamdScanner(fake.url, { timeoutMs: 5_000 });
    await expect(scanner.scan(Readable.from([Buffer.from('x')]))).rejects.toBeInstanceOf(expected);
  });

  it('takes a refusal that clamd sends before the stream ended', async () => {
    // As clamd does past StreamMaxLength: answer at once and close, while the client still sends.
    const fake = await fakeClamd({
      answer: likeClamd,
      onBody: (received, socket) => {
        if (received > 256 * 1024) socket.end('INSTREAM size limit exceeded. ERROR\0');
      },
    });
    const stream = nearMisses(32 * MiB, 65_536);
    await expect(createClamdScanner(fake.url).scan(stream)).rejects.toBeInstanceOf(ScanRejectedError);
    expect(stream.destroyed).toBe(true);
  });

  it('takes an early close by a clamd that still answers PING as a refusal', async () => {
    const fake = await fakeClamd({
      answer: likeClamd,
      onBody: (received, socket) => {
        if (received > 256 * 1024) socket.destroy();
      },
    });
    const stream = nearMisses(32 * MiB, 65_536);
    const error = await createClamdScanner(fake.url)
      .scan(stream)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ScanRejectedError);
    expect(String(error)).toMatch(/StreamMaxLength/);
    expect(fake.requests.map((request) => request.command)).toEqual(['zPING']);
  });

  it('takes a close without a verdict after the whole stream as a refusal while clamd answers PING', async () => {
    // The stream can fit in the socket buffers before clamd reads past its limit and resets.
    const fake = await fakeClamd({
      answer: (request, socket, server) => {
        if (request.command === 'zINSTREAM') socket.resetAndDestroy();
        else likeClamd(request, socket, server);
      },
    });
    const error = await createClamdScanner(fake.url)
      .scan(nearMisses(MiB, 65_536))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ScanRejectedError);
    expect(fake.requests.map((request) => request.command)).toEqual(['zINSTREAM', 'zPING']);
  });

  it('takes an early close by a daemon that went away as unavailable', async () => {
    const fake = await fakeClamd({
      answer: likeClamd,
      onBody: (received, socket, server) => {
        if (received > 256 * 1024) {
          server.close();
          socket.destroy();
        }
      },
    });
    const error = await createClamdScanner(fake.url)
      .scan(nearMisses(32 * MiB, 65_536))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ScannerUnavailableError);
  });

  it('pings with zPING and wants PONG', async () => {
    const fake = await fakeClamd({ answer: likeClamd });
    await createClamdScanner(fake.url).ping(1_000);
    expect(fake.requests.map((request) => request.command)).toEqual(['zPING']);

    const wrong = await fakeClamd({ answer: (_request, socket) => socket.end('PANG\0') });
    await expect(createClamdScanner(wrong.url).ping(1_000)).rejects.toBeInstanceOf(ScannerUnavailableError);

    const mute = await fakeClamd({ answer: () => {} });
    const [result, ms] = await elapsed(createClamdScanner(mute.url).ping(200));
    expect(reason(result)).toBeInstanceOf(ScannerUnavailableError);
    expect(ms).toBeLessThan(1_500);
  });

  it('speaks over a unix socket', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'coffer-clamd-'));
    try {
      const path = join(dir, 'clamd.sock');
      const fake = await fakeClamd({ answer: likeClamd, path });
      for (const url of [fake.url, path]) {
        const scanner = createClamdScanner(url, { timeoutMs: 5_000 });
        await scanner.ping(1_000);
        await expect(scanner.scan(pieces(Buffer.from('clean bytes'), 3))).resolves.toEqual({ clean: true });
        await expect(scanner.scan(pieces(eicarTestFile(), 5))).resolves.toEqual({
          clean: false,
          signature: 'Eicar-Signature',
        });
      }
      expect(fake.requests.map((request) => request.command)).toEqual([
        'zPING',
        'zINSTREAM',
        'zINSTREAM',
        'zPING',
        'zINSTREAM',
        'zINSTREAM',
      ]);
    } finally {
      await Promise.all(fakes.splice(0).map((fake) => fake.close()));
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('clamd URLs and answers', () => {
  it.each([
    ['tcp://127.0.0.1:3310', { host: '127.0.0.1', port: 3310 }],
    ['tcp://clamav:3310', { host: 'clamav', port: 3310 }],
    ['tcp://[::1]:3310', { host: '::1', port: 3310 }],
    ['/run/clamav/clamd.ctl', { path: '/run/clamav/clamd.ctl' }],
    ['unix:/run/clamav/clamd.ctl', { path: '/run/clamav/clamd.ctl' }],
    ['unix:///run/clamav/clamd.ctl', { path: '/run/clamav/clamd.ctl' }],
  ])('parses %s', (url, expected) => {
    expect(parseClamdUrl(url)).toEqual(expected);
  });

  it.each(['http://127.0.0.1:3310', 'tcp://127.0.0.1', 'unix:relative.sock', 'clamd'])(
    'rejects %s',
    (url) => {
      expect(() => createClamdScanner(url)).toThrow(/clamd URL/);
    },
  );

  it('reads verdicts', () => {
    expect(parseScanReply('stream: OK')).toEqual({ clean: true });
    expect(parseScanReply('stream: Win.Test.EICAR_HDB-1 FOUND')).toEqual({
      clean: false,
      signature: 'Win.Test.EICAR_HDB-1',
    });
    expect(() => parseScanReply('INSTREAM size limit exceeded. ERROR')).toThrow(ScanRejectedError);
    expect(() => parseScanReply('stream: lstat() failed ERROR')).toThrow(ScannerUnavailableError);
  });
});

describe('createScanner', () => {
  it('uses clamd when a URL is set', () => {
    const warnings: string[] = [];
    const scanner = createScanner('tcp://127.0.0.1:3310', { warn: (msg) => warnings.push(msg) });
    expect(scanner.name).toBe('clamd');
    expect(warnings).toEqual([]);
  });

  it('falls back to the EICAR scanner with one warning', () => {
    const warnings: string[] = [];
    const scanner = createScanner(undefined, { warn: (msg) => warnings.push(msg) });
    expect(scanner.name).toBe('eicar');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/no antivirus engine/i);
  });
});

// --- the real clamd that .ci/clamd.sh starts ------------------------------------------------------

describe.runIf(clamdUrl)('a real clamd (COFFER_TEST_CLAMD_URL)', () => {
  const scanner = () => createClamdScanner(clamdUrl!, { timeoutMs: 30_000 });

  it('refuses a stream above its StreamMaxLength, and still answers after', async () => {
    const stream = nearMisses(26 * MiB, 65_536);
    await expect(scanner().scan(stream)).rejects.toBeInstanceOf(ScanRejectedError);
    expect(stream.destroyed).toBe(true);
    await expect(scanner().ping(2_000)).resolves.toBeUndefined();
  });

  it('scans several streams at once', async () => {
    const results = await Promise.all([
      scanner().scan(pieces(eicarTestFile(), 10)),
      scanner().scan(nearMisses(2 * MiB)),
      scanner().scan(Readable.from([eicarTestFile()])),
    ]);
    expect(results.map((result) => result.clean)).toEqual([false, true, false]);
  });
});
