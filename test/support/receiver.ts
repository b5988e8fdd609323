import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfSignedCertificate } from './certificate.ts';
import { sleep } from './processes.ts';

/** What an endpoint answers to one request. */
export type Behaviour =
  | { status: number; body?: string | Buffer; delayMs?: number }
  | { redirect: string; status?: number }
  /** Never answers (until the receiver closes). */
  | 'hang';

export interface Received {
  /** Milliseconds since the epoch when the request body was complete. */
  at: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body, exactly as received. */
  raw: Buffer;
  /** The body parsed as JSON (undefined when it is not JSON). */
  json: any;
  /** x-coffer-signature checked against the raw body with the endpoint's secret; undefined without a secret. */
  signatureValid: boolean | undefined;
}

export interface Endpoint {
  readonly path: string;
  /** `https://127.0.0.1:<port><path>` */
  readonly url: string;
  /** The signing secret of the webhook (set once the webhook is created). */
  secret: string | undefined;
  /** Every request received, in arrival order. */
  readonly requests: Received[];
  /** Answers for the next requests, used up in order; then `fallback`. */
  script: Behaviour[];
  fallback: Behaviour;
  /** Requests being held open by `hang` right now. */
  readonly hanging: number;
  /** Resolves once `count` requests were received; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  /** Answers every request held open by `hang` now, with `status`. */
  release(status: number): void;
}

export interface Receiver {
  /** `https://127.0.0.1:<port>` */
  readonly origin: string;
  readonly port: number;
  /** The receiver's self-signed certificate (PEM): the CA a client must trust. */
  readonly ca: string;
  endpoint(options?: { fallback?: Behaviour; script?: Behaviour[]; secret?: string }): Endpoint;
  close(): Promise<void>;
}

/**
 * Verifies a Coffer signature the way a user's server would: HMAC-SHA256 of the raw body with the
 * signing secret, compared with the lowercase hex header in constant time.
 */
export function verifySignature(secret: string, raw: Buffer, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string' || !/^[0-9a-f]{64}$/.test(header)) return false;
  const expected = createHmac('sha256', secret).update(raw).digest();
  return timingSafeEqual(expected, Buffer.from(header, 'hex'));
}

/** A self-signed certificate for localhost and 127.0.0.1, as PEM text. */
function certificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-receiver-'));
  try {
    const { keyFile, certFile } = selfSignedCertificate(dir);
    return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A webhook receiver over HTTPS on 127.0.0.1 that records every request and answers as told. */
export async function startReceiver(): Promise<Receiver> {
  const { key, cert } = certificate();
  const endpoints = new Map<string, Endpoint & { hangingSet: Set<ServerResponse> }>();
  let next = 0;

  const server: Server = createServer({ key, cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const endpoint = endpoints.get(path);
      if (!endpoint) {
        res.writeHead(404).end();
        return;
      }
      const raw = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
      endpoint.requests.push({
        at: Date.now(),
        method: req.method ?? '',
        path,
        headers: req.headers,
        raw,
        json,
        signatureValid:
          endpoint.secret === undefined
            ? undefined
            : verifySignature(endpoint.secret, raw, req.headers['x-coffer-signature']),
      });
      const behaviour = endpoint.script.shift() ?? endpoint.fallback;
      if (behaviour === 'hang') {
        endpoint.hangingSet.add(res);
        res.on('close', () => endpoint.hangingSet.delete(res));
        return;
      }
      if ('redirect' in behaviour) {
        res.writeHead(behaviour.status ?? 302, { location: behaviour.redirect }).end();
        return;
      }
      const answer = () =>
        res.writeHead(behaviour.status, { 'content-type': 'text/plain' }).end(behaviour.body ?? '');
      if (behaviour.delayMs) setTimeout(answer, behaviour.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const origin = `https://127.0.0.1:${port}`;

  return {
    origin,
    port,
    ca: cert,
    endpoint(options = {}) {
      next += 1;
      const path = `/hooks/${next}`;
      const requests: Received[] = [];
      const hangingSet = new Set<ServerResponse>();
      const endpoint = {
        path,
        url: `${origin}${path}`,
        secret: options.secret,
        requests,
        script: [...(options.script ?? [])],
        fallback: options.fallback ?? { status: 200, body: 'ok' },
        hangingSet,
        get hanging() {
          return hangingSet.size;
        },
        async waitFor(count: number, timeoutMs = 5000) {
          const deadline = Date.now() + timeoutMs;
          while (requests.length < count) {
            if (Date.now() > deadline) {
              throw new Error(`${path}: ${requests.length} of ${count} requests after ${timeoutMs} ms`);
            }
            await sleep(10);
          }
          return requests;
        },
        release(status: number) {
          for (const res of hangingSet) res.writeHead(status).end();
          hangingSet.clear();
        },
      };
      endpoints.set(path, endpoint);
      return endpoint;
    },
    async close() {
      for (const endpoint of endpoints.values()) for (const res of endpoint.hangingSet) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Webhook URLs whose host is, or resolves to, a non-public address: each must be refused. */
export const NON_PUBLIC_URLS = [
  'https://127.0.0.1/hook',
  'https://127.0.0.1:8443/hook',
  'https://[::1]/hook',
  'https://localhost/hook',
  'https://0.0.0.0/hook',
  'https://10.0.0.1/hook',
  'https://172.16.0.1/hook',
  'https://192.168.1.1/hook',
  'https://169.254.169.254/latest/meta-data/',
  'https://[fe80::1]/hook',
  'https://[fd00::1]/hook',
  'https://100.64.0.1/hook',
  'https://[::ffff:127.0.0.1]/hook',
  'https://[::ffff:10.0.0.1]/hook',
  'https://2130706433/hook',
  'https://127.1/hook',
  'https://0x7f000001/hook',
  'https://localhost:8443/hook',
  'https://[::ffff:7f00:1]/hook',
  'https://127.0.0.1./hook',
  // Loopback aliases, refused by name whether or not this machine resolves them.
  'https://localhost./hook',
  'https://LocalHost.:8443/hook',
  'https://localhost.localdomain/hook',
  'https://localhost.localdomain./hook',
  'https://ip6-localhost/hook',
  'https://ip6-loopback./hook',
  'https://localhost6/hook',
  'https://hooks.localhost/hook',
  'https://a.b.localhost./hook',
];
