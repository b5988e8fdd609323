import { createConnection, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { type Scanner, ScannerUnavailableError, ScanRejectedError, type ScanResult } from './scanner.ts';

/** Where clamd listens: a TCP address or a unix socket's path. */
export type ClamdAddress = { host: string; port: number } | { path: string };

export interface ClamdOptions {
  /**
   * How long one scan may take in all, from connecting to clamd's verdict (default 120 s). The PING
   * that follows an early close (see createClamdScanner) may add up to 5 s; `ping` has its own.
   */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 120_000;
/** clamd reads chunks of any size up to StreamMaxLength; 64 KiB keeps both sides' buffers small. */
const MAX_CHUNK = 64 * 1024;
/** clamd's answers are one short line; anything longer is not clamd. */
const MAX_REPLY = 4096;
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Parses `tcp://host:port`, `unix:/path/to/clamd.sock` (also `unix:///path`) or a bare absolute path.
 * Throws an Error for anything else.
 */
export function parseClamdUrl(url: string): ClamdAddress {
  if (url.startsWith('/')) return { path: url };
  if (url.startsWith('unix:')) {
    const path = url.slice('unix:'.length).replace(/^\/\/(?=\/)/, '');
    if (!path.startsWith('/')) throw new Error(`clamd URL ${url}: a unix socket needs an absolute path`);
    return { path };
  }
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  const port = Number(parsed?.port);
  if (parsed?.protocol !== 'tcp:' || !parsed.hostname || !Number.isInteger(port) || port <= 0) {
    throw new Error(`clamd URL ${url}: expected tcp://host:port, unix:/path or /path`);
  }
  // URL keeps the brackets of an IPv6 literal; net.connect wants the bare address.
  return { host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'), port };
}

/**
 * A scanner speaking clamd's INSTREAM protocol (`zINSTREAM\0`, chunks each prefixed by their 4-byte
 * big-endian length, a zero-length chunk to end) over TCP or a unix socket. The file is streamed,
 * never buffered: it is sent in pieces of at most 64 KiB, and read no faster than the socket drains.
 *
 * Mapping of outcomes:
 * - `stream: OK` → clean; `stream: <name> FOUND` → not clean, signature `<name>`.
 * - `stream: Heuristics.Limits.Exceeded... FOUND` (clamd's AlertExceedsMax) → ScanRejectedError: the
 *   engine did not look at the whole file, which is neither clean nor a detection.
 * - `INSTREAM size limit exceeded. ERROR` → ScanRejectedError (the stream is over StreamMaxLength).
 * - clamd closing or resetting the connection of a scan without a reply (it does so after that
 *   size-limit reply, which is lost when the close resets the connection first; the whole stream may
 *   already sit in the socket buffers by then, so how much was sent tells nothing): a quick PING tells
 *   the two causes apart: clamd answers → ScanRejectedError (it refused this stream), clamd does not →
 *   ScannerUnavailableError.
 * - Any other `... ERROR` reply → ScannerUnavailableError. Such errors (out of memory, no room for a
 *   temporary file, a read timeout, an overloaded queue) are conditions of the daemon, not verdicts on
 *   the file, so the caller retries with backoff; its attempt limit ends one that never clears.
 * - Connecting fails, the connection is reset or closed without a reply, the timeout passes, or the
 *   reply is not clamd's (too long, unknown form) → ScannerUnavailableError.
 * - An error of the input stream is passed through unchanged.
 *
 * For verdicts on whole files, clamd's MaxFileSize and MaxScanSize must be at least its
 * StreamMaxLength: over those limits clamd stops looking and answers OK unless AlertExceedsMax is on.
 */
export function createClamdScanner(url: string, options: ClamdOptions = {}): Scanner {
  const address = parseClamdUrl(url);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const where = 'path' in address ? address.path : `${address.host}:${address.port}`;

  async function ping(ms: number): Promise<void> {
    const outcome = await exchange(address, where, 'zPING\0', undefined, ms);
    if (outcome.kind !== 'reply') {
      throw new ScannerUnavailableError(`clamd at ${where} closed the connection without answering PING`);
    }
    if (outcome.reply !== 'PONG') {
      throw new ScannerUnavailableError(`clamd at ${where} answered PING with ${quote(outcome.reply)}`);
    }
  }

  return {
    name: 'clamd',
    ping,
    async scan(stream: Readable): Promise<ScanResult> {
      const outcome = await exchange(address, where, 'zINSTREAM\0', stream, timeoutMs);
      if (outcome.kind === 'reply') return parseScanReply(outcome.reply, where);
      if (outcome.kind === 'closed') {
        try {
          await ping(Math.min(timeoutMs, PROBE_TIMEOUT_MS));
        } catch (error) {
          throw new ScannerUnavailableError(
            `clamd at ${where} closed the connection without a verdict, and no longer answers`,
            { cause: error },
          );
        }
        throw new ScanRejectedError(
          `clamd at ${where} closed the connection without a verdict, as it does when a stream exceeds ` +
            'its StreamMaxLength',
        );
      }
      throw new ScannerUnavailableError(`clamd at ${where} closed the connection without a verdict`);
    },
  };
}

/** Turns clamd's answer to INSTREAM (without its NUL) into a result, or throws as described above. */
export function parseScanReply(reply: string, where = 'clamd'): ScanResult {
  const text = reply.trim();
  const body = text.startsWith('stream: ') ? text.slice('stream: '.length) : text;
  if (body === 'OK') return { clean: true };
  if (body.endsWith(' FOUND')) {
    const signature = body.slice(0, -' FOUND'.length).trim();
    if (signature.startsWith('Heuristics.Limits.Exceeded')) {
      throw new ScanRejectedError(`clamd at ${where} did not scan the whole file: ${signature}`);
    }
    if (signature) return { clean: false, signature };
  }
  if (body.endsWith(' ERROR')) {
    const message = body.slice(0, -' ERROR'.length).trim();
    if (/size limit exceeded/i.test(message)) {
      throw new ScanRejectedError(`clamd at ${where} refused the file: ${message}`);
    }
    throw new ScannerUnavailableError(`clamd at ${where} failed to scan: ${message}`);
  }
  throw new ScannerUnavailableError(`clamd at ${where} gave an unexpected answer: ${quote(text)}`);
}

type Outcome =
  /** A complete reply, without its terminating NUL. */
  | { kind: 'reply'; reply: string }
  /** clamd closed or reset the connection without a reply. */
  | { kind: 'closed' };

/**
 * Sends `command`, then `body` as INSTREAM chunks when given, and waits for one NUL-terminated
 * reply. Rejects with ScannerUnavailableError when connecting fails, on a connection error of a
 * request without a body, on an overlong reply and after `timeoutMs`; with the body's own error when it fails.
 * The body is consumed or destroyed in every case.
 */
function exchange(
  address: ClamdAddress,
  where: string,
  command: string,
  body: Readable | undefined,
  timeoutMs: number,
): Promise<Outcome> {
  return new Promise<Outcome>((resolve, reject) => {
    const socket: Socket = createConnection(address);
    const received: Buffer[] = [];
    let receivedBytes = 0;
    let connected = false;
    let settled = false;

    const settle = (error: Error | undefined, outcome?: Outcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (body && !body.destroyed) body.destroy();
      if (error) reject(error);
      else resolve(outcome!);
    };
    const unavailable = (message: string, cause?: unknown): void =>
      settle(new ScannerUnavailableError(`clamd at ${where}: ${message}`, { cause }));
    /** The connection ended: a reply without its NUL is still a reply (clamd sends one per line). */
    const ended = (cause?: Error): void => {
      if (settled) return;
      const partial = Buffer.concat(received).toString('utf8').trim();
      if (partial) settle(undefined, { kind: 'reply', reply: partial });
      else if (!connected) unavailable(`cannot connect (${describe(cause)})`, cause);
      else if (body || !cause) settle(undefined, { kind: 'closed' });
      else unavailable(`connection failed (${describe(cause)})`, cause);
    };

    const timer = setTimeout(
      () =>
        unavailable(connected ? `no answer within ${timeoutMs} ms` : `cannot connect within ${timeoutMs} ms`),
      timeoutMs,
    );

    socket.on('data', (data: Buffer) => {
      const nul = data.indexOf(0);
      received.push(nul === -1 ? data : data.subarray(0, nul));
      receivedBytes += nul === -1 ? data.length : nul;
      if (nul !== -1) {
        settle(undefined, { kind: 'reply', reply: Buffer.concat(received).toString('utf8') });
      } else if (receivedBytes > MAX_REPLY) {
        unavailable(`the answer exceeds ${MAX_REPLY} bytes; is this clamd?`);
      }
    });
    socket.on('end', () => ended());
    socket.on('close', () => ended());
    socket.on('error', (error: Error) => {
      // EPIPE/ECONNRESET while sending: clamd gave up on the stream (see `ended`).
      ended(error);
    });
    socket.on('connect', () => {
      connected = true;
      socket.write(command);
      if (!body) return;
      sendBody(socket, body, () => settled).catch((error: unknown) => {
        if (settled) return;
        // A failed write is reported by the socket's own events; only the body's errors land here.
        settle(error instanceof Error ? error : new Error(String(error)));
      });
    });
  });
}

/** Writes `body` as INSTREAM chunks and the terminating zero-length chunk, honouring backpressure. */
async function sendBody(socket: Socket, body: Readable, stopped: () => boolean): Promise<void> {
  for await (const chunk of body) {
    if (stopped()) return;
    const bytes = toBuffer(chunk);
    for (let offset = 0; offset < bytes.length; offset += MAX_CHUNK) {
      const piece = bytes.subarray(offset, offset + MAX_CHUNK);
      const header = Buffer.alloc(4);
      header.writeUInt32BE(piece.length, 0);
      socket.cork();
      socket.write(header);
      const more = socket.write(piece);
      socket.uncork();
      // Waiting for the event loop before each write lets a reply that clamd sent meanwhile (its
      // size-limit error) be read before a write could hit the connection it reset.
      await (more ? new Promise((resolve) => setImmediate(resolve)) : drained(socket));
      if (stopped()) return;
    }
  }
  if (stopped()) return;
  socket.write(Buffer.alloc(4));
}

function drained(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('drain', done);
    socket.on('close', done);
  });
}

function toBuffer(chunk: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk, 'utf8');
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError(`cannot scan a stream chunk of type ${typeof chunk}`);
}

function describe(error: Error | undefined): string {
  if (!error) return 'connection closed';
  const code = (error as NodeJS.ErrnoException).code;
  return code ? `${code}: ${error.message}` : error.message;
}

function quote(text: string): string {
  return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
}
