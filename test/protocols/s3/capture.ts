/**
 * A loopback S3 stand-in for the SigV4 tests: it feeds every request it receives to `authenticate`
 * and `verifiedBody`, answers 200 (with just enough of a response for the SDK to parse) or the S3
 * error document, and records what happened, so tests can drive it with real clients.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '../../../src/protocols/s3/canonical.ts';
import {
  type Authenticated,
  authenticate,
  type CredentialLookup,
  type S3Request,
  SigV4Error,
  type VerifiedBodyOptions,
  verifiedBody,
} from '../../../src/protocols/s3/sigv4.ts';

export const REGION = 'us-east-1';
export const ACCESS_KEY = 'AKIDCOFFERTEST';
export const SECRET_KEY = 'cofferTestSecret/with+odd=chars';
export const TOKEN_KEY = 'ASIACOFFERTEMP';
export const TOKEN_SECRET = 'temporarySecret';
export const SESSION_TOKEN = 'FwoGZXIvYXdzEJr//////////wEaDA+session/token=';

/** What the server made of one request. */
export interface Outcome {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  status: number;
  code?: string;
  message?: string;
  auth?: Authenticated;
  /** The verified body, when it was small enough to keep. */
  body?: Buffer;
  bodyLength: number;
  bodySha256?: string;
  /** Whether the sink the verified body was piped into was ever finished. */
  sinkFinished: boolean;
  /** The largest growth of live buffer memory (measured after a GC) seen while the body streamed. */
  peakBufferGrowth: number;
}

export interface Hooks {
  now?: () => Date;
  region?: string;
  lookup?: CredentialLookup;
  bodyOptions?: VerifiedBodyOptions;
  /** Rewrites the request before it is checked, as a party in between could. */
  tamper?: (request: S3Request) => void;
  /** Rewrites the raw (still aws-chunked) body; the whole body is read first. */
  tamperBody?: (raw: Buffer) => Buffer;
}

const KEEP_BODY = 1 << 20;
/** How often, in body bytes, live memory is measured (a full GC each time, so not too often). */
const MEASURE_EVERY = 4 << 20;

setFlagsFromString('--expose-gc');
/** A full collection, so that what is measured is what is still referenced, not garbage. */
const collect = runInNewContext('gc') as () => void;
const liveBuffers = () => {
  collect();
  return process.memoryUsage().arrayBuffers;
};

export const defaultLookup: CredentialLookup = async (accessKeyId, sessionToken) => {
  if (accessKeyId === ACCESS_KEY && sessionToken === undefined) return { secretAccessKey: SECRET_KEY };
  if (accessKeyId === TOKEN_KEY && sessionToken === SESSION_TOKEN) return { secretAccessKey: TOKEN_SECRET };
  return undefined;
};

export class CaptureServer {
  readonly outcomes: Outcome[] = [];
  hooks: Hooks = {};
  #server: Server;

  constructor() {
    this.#server = createServer((req, res) => {
      this.#handle(req).then(({ outcome, reply }) => {
        this.outcomes.push(outcome);
        res.writeHead(outcome.status, reply.headers);
        res.end(reply.body);
      });
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  get last(): Outcome {
    const outcome = this.outcomes.at(-1);
    if (!outcome) throw new Error('no request reached the server');
    return outcome;
  }

  async #handle(req: IncomingMessage) {
    const url = req.url ?? '/';
    const mark = url.indexOf('?');
    const request: S3Request = {
      method: req.method ?? 'GET',
      path: mark === -1 ? url : url.slice(0, mark),
      query: mark === -1 ? '' : url.slice(mark + 1),
      headers: { ...req.headers },
    };
    const outcome: Outcome = {
      method: request.method,
      url,
      headers: req.headers,
      status: 200,
      bodyLength: 0,
      sinkFinished: false,
      peakBufferGrowth: 0,
    };
    const hooks = this.hooks;
    try {
      hooks.tamper?.(request);
      let body: Readable = req;
      if (hooks.tamperBody) {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk);
        body = Readable.from([hooks.tamperBody(Buffer.concat(chunks))]);
      }
      const auth = await authenticate(request, hooks.lookup ?? defaultLookup, {
        region: hooks.region ?? REGION,
        now: hooks.now?.(),
      });
      outcome.auth = auth;
      const verified = verifiedBody(body, auth, hooks.bodyOptions);
      const hash = createHash('sha256');
      const kept: Buffer[] = [];
      const baseline = liveBuffers();
      let nextMeasure = MEASURE_EVERY;
      await pipeline(
        verified,
        new Writable({
          write(chunk: Buffer, _encoding, callback) {
            hash.update(chunk);
            outcome.bodyLength += chunk.length;
            if (outcome.bodyLength <= KEEP_BODY) kept.push(chunk);
            if (outcome.bodyLength >= nextMeasure) {
              nextMeasure += MEASURE_EVERY;
              const growth = liveBuffers() - baseline;
              if (growth > outcome.peakBufferGrowth) outcome.peakBufferGrowth = growth;
            }
            callback();
          },
          final(callback) {
            outcome.sinkFinished = true;
            callback();
          },
        }),
      );
      outcome.bodySha256 = hash.digest('hex');
      if (outcome.bodyLength <= KEEP_BODY) outcome.body = Buffer.concat(kept);
      return { outcome, reply: success(request, verified.checksum) };
    } catch (error) {
      if (!(error instanceof SigV4Error)) {
        outcome.status = 500;
        outcome.message = String(error);
        return { outcome, reply: { headers: {}, body: String(error) } };
      }
      outcome.status = error.status;
      outcome.code = error.code;
      outcome.message = error.message;
      const details = Object.entries(error.details)
        .map(([name, value]) => `<${name}>${escapeXml(value)}</${name}>`)
        .join('');
      return {
        outcome,
        reply: {
          headers: { 'content-type': 'application/xml' },
          body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${error.code}</Code><Message>${escapeXml(error.message)}</Message>${details}<RequestId>test</RequestId></Error>`,
        },
      };
    }
  }
}

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Just enough of S3's answer for the SDK to parse each operation the tests send. */
function success(request: S3Request, checksum: { algorithm: string; value: string } | undefined) {
  const headers: Record<string, string> = { etag: '"0123456789abcdef0123456789abcdef"' };
  if (checksum) headers[`x-amz-checksum-${checksum.algorithm}`] = checksum.value;
  if (request.method === 'GET' && /(^|&)list-type=2(&|$)/.test(request.query)) {
    headers['content-type'] = 'application/xml';
    return {
      headers,
      body: '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Name>b</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>',
    };
  }
  if (request.method === 'GET')
    return { headers: { ...headers, 'content-type': 'text/plain' }, body: 'object body' };
  return { headers, body: '' };
}

export interface SignedChunksOptions {
  url: string;
  /** The object's bytes, as the chunks to send them in. */
  chunks: Iterable<Buffer> | AsyncIterable<Buffer>;
  decodedLength: number;
  /** Send the CRC32 trailer, signed (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER). */
  trailer?: boolean;
  secret?: string;
  /** Rewrites each framed piece before it is sent. */
  frame?: (piece: string, kind: 'header' | 'trailer') => string;
}

/**
 * Sends a PUT with STREAMING-AWS4-HMAC-SHA256-PAYLOAD(-TRAILER), which the v3 SDK no longer sends
 * itself: @smithy/signature-v4 signs the request (the seed) and every chunk's string to sign; this
 * only does the aws-chunked framing.
 */
export async function putSignedChunks(
  options: SignedChunksOptions,
): Promise<{ status: number; body: string }> {
  const url = new URL(options.url);
  const signer = new SignatureV4({
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: options.secret ?? SECRET_KEY },
    region: REGION,
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
  });
  const signingDate = new Date();
  const headers: Record<string, string> = {
    host: url.host,
    'content-encoding': 'aws-chunked',
    'x-amz-content-sha256': options.trailer
      ? 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER'
      : 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    'x-amz-decoded-content-length': String(options.decodedLength),
  };
  if (options.trailer) headers['x-amz-trailer'] = 'x-amz-checksum-crc32';
  const query: Record<string, string> = {};
  for (const [name, value] of url.searchParams) query[name] = value;
  const signed = await signer.sign(
    {
      method: 'PUT',
      protocol: 'http:',
      hostname: url.hostname,
      port: Number(url.port),
      path: url.pathname,
      query,
      headers,
    },
    { signingDate },
  );
  const seed = /Signature=([0-9a-f]{64})/.exec(signed.headers.authorization!)![1]!;
  const longDate = signed.headers['x-amz-date']!;
  const scope = `${longDate.slice(0, 8)}/${REGION}/s3/aws4_request`;
  const signString = (text: string) =>
    signer.sign(text, { signingDate, signingRegion: REGION, signingService: 's3' });
  const frame = options.frame ?? ((piece: string) => piece);
  const { crc32 } = await import('node:zlib');

  async function* body() {
    let previous = seed;
    let crc = 0;
    const sign = async (data: Buffer) => {
      previous = await signString(
        [
          'AWS4-HMAC-SHA256-PAYLOAD',
          longDate,
          scope,
          previous,
          createHash('sha256').update('').digest('hex'),
          createHash('sha256').update(data).digest('hex'),
        ].join('\n'),
      );
      return previous;
    };
    for await (const chunk of options.chunks) {
      crc = crc32(chunk, crc);
      yield Buffer.from(
        frame(`${chunk.length.toString(16)};chunk-signature=${await sign(chunk)}\r\n`, 'header'),
      );
      yield chunk;
      yield Buffer.from('\r\n');
    }
    yield Buffer.from(frame(`0;chunk-signature=${await sign(Buffer.alloc(0))}\r\n`, 'header'));
    if (options.trailer) {
      const value = Buffer.alloc(4);
      value.writeUInt32BE(crc >>> 0);
      const line = `x-amz-checksum-crc32:${value.toString('base64')}\n`;
      const signature = await signString(
        [
          'AWS4-HMAC-SHA256-TRAILER',
          longDate,
          scope,
          previous,
          createHash('sha256').update(line).digest('hex'),
        ].join('\n'),
      );
      yield Buffer.from(
        frame(`${line.replace('\n', '\r\n')}x-amz-trailer-signature:${signature}\r\n`, 'trailer'),
      );
    }
    yield Buffer.from('\r\n');
  }

  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'PUT', headers: { ...signed.headers, 'transfer-encoding': 'chunked' } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }));
      },
    );
    req.on('error', reject);
    pipeline(Readable.from(body()), req).catch(() => {});
  });
}
