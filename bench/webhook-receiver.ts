/**
 * The webhook receiver of bench/webhooks.ts, in a process of its own (so that neither the client nor the
 * Coffer server shares its thread): a node:https server on 127.0.0.1 that answers 200 (empty body) to
 * every POST, once the body is read. For each request it records the arrival time, the path, the
 * x-coffer-delivery-id (to count duplicates), the delay since the envelope's `timestamp` (event → arrival),
 * and checks x-coffer-signature: HMAC-SHA256 hex of the raw body with the secret registered for the path.
 *
 * Controlled over the IPC channel of its parent (bench/helper-servers.ts startWebhookReceiver):
 *   → {type: 'secret', path, secret}   the signing secret of a path
 *   → {type: 'reset'}                  forgets what was received
 *   → {type: 'stats', id, full}        ← {type: 'stats', id, stats: ReceiverStats} (without the arrays unless full)
 *   ← {type: 'ready', port}            once listening
 * Environment: BENCH_RECEIVER_KEY, BENCH_RECEIVER_CERT (PEM file paths).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

export interface ReceiverStats {
  /** POSTs answered since the last reset. */
  count: number;
  /** Per path. */
  paths: Record<string, number>;
  /** Arrival times (ms since the epoch, sub-ms precision) of the first and the last request; 0 when none. */
  first: number;
  last: number;
  /** All arrival times, in order (ms since the epoch). */
  arrivals: number[];
  /** Milliseconds from the envelope's timestamp to the arrival, per request whose body has one. */
  delays: number[];
  /** Requests whose signature was checked (their path has a secret), and those that did not match. */
  checked: number;
  mismatches: number;
  /** Requests carrying an x-coffer-delivery-id already received. */
  duplicates: number;
  /** Body bytes received. */
  bytes: number;
  /** TLS connections accepted (keep-alive reuses them: far fewer than requests). */
  connections: number;
}

type Message =
  | { type: 'secret'; path: string; secret: string }
  | { type: 'reset' }
  | { type: 'stats'; id: number; full: boolean };

const now = () => performance.timeOrigin + performance.now();
const secrets = new Map<string, string>();
let seen = new Set<string>();
let stats: ReceiverStats = fresh();

function fresh(): ReceiverStats {
  return {
    count: 0,
    paths: {},
    first: 0,
    last: 0,
    arrivals: [],
    delays: [],
    checked: 0,
    mismatches: 0,
    duplicates: 0,
    bytes: 0,
    connections: 0,
  };
}

function signatureMatches(secret: string, raw: Buffer, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string' || !/^[0-9a-f]{64}$/.test(header)) return false;
  return timingSafeEqual(createHmac('sha256', secret).update(raw).digest(), Buffer.from(header, 'hex'));
}

const server = createServer(
  {
    key: readFileSync(process.env.BENCH_RECEIVER_KEY ?? ''),
    cert: readFileSync(process.env.BENCH_RECEIVER_CERT ?? ''),
  },
  (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = now();
      const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const path = (req.url ?? '/').split('?')[0]!;
      stats.count++;
      stats.paths[path] = (stats.paths[path] ?? 0) + 1;
      if (stats.first === 0) stats.first = at;
      stats.last = at;
      stats.arrivals.push(at);
      stats.bytes += raw.length;
      const secret = secrets.get(path);
      if (secret !== undefined) {
        stats.checked++;
        if (!signatureMatches(secret, raw, req.headers['x-coffer-signature'])) stats.mismatches++;
      }
      const delivery = req.headers['x-coffer-delivery-id'];
      if (typeof delivery === 'string') {
        if (seen.has(delivery)) stats.duplicates++;
        else seen.add(delivery);
      }
      try {
        const timestamp = Date.parse(
          (JSON.parse(raw.toString('utf8')) as { timestamp?: string }).timestamp ?? '',
        );
        if (Number.isFinite(timestamp)) stats.delays.push(at - timestamp);
      } catch {
        // not an envelope
      }
      res.writeHead(200, { 'content-length': '0' }).end();
    });
  },
);
server.keepAliveTimeout = 60_000;
server.on('secureConnection', () => {
  stats.connections++;
});

process.on('message', (message: Message) => {
  if (message.type === 'secret') secrets.set(message.path, message.secret);
  else if (message.type === 'reset') {
    stats = fresh();
    seen = new Set();
  } else if (message.type === 'stats') {
    const answer = message.full ? stats : { ...stats, arrivals: [], delays: [] };
    process.send?.({ type: 'stats', id: message.id, stats: answer });
  }
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.send?.({ type: 'ready', port });
});
