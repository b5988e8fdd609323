import { createServer, type IncomingMessage, request, type Server } from 'node:http';

export interface Seen {
  method: string;
  /** Path and query, as received. */
  url: string;
  headers: IncomingMessage['headers'];
}

/** What to do with a request: forward it (possibly to another URL), answer it here, or cut the connection. */
export type Decision =
  | undefined
  | { forwardTo: string }
  | { status: number; body?: string; headers?: Record<string, string> }
  | 'cut';

export interface HttpProxy {
  /** http://127.0.0.1:port */
  url: string;
  /** Where requests go: set once the server behind is up. */
  target: string;
  /** Every request received, in order. */
  seen: Seen[];
  /** Decides each request's fate; forwards all when unset. */
  intercept?: (request: Seen) => Decision | Promise<Decision>;
  /** Holds each PUT this long before forwarding it, so that parallel ones overlap. */
  putDelayMs: number;
  /** The most PUTs forwarded and not yet answered at one moment. */
  maxPutsInFlight: number;
  close(): Promise<void>;
}

/** An HTTP proxy in front of Coffer (API and object URLs alike) that a test steers request by request. */
export async function startHttpProxy(): Promise<HttpProxy> {
  let putsInFlight = 0;
  const proxy: HttpProxy = {
    url: '',
    target: '',
    seen: [],
    putDelayMs: 0,
    maxPutsInFlight: 0,
    close: async () => {},
  };
  const server: Server = createServer(async (incoming, outgoing) => {
    const seen: Seen = { method: incoming.method!, url: incoming.url!, headers: incoming.headers };
    proxy.seen.push(seen);
    const decision = await proxy.intercept?.(seen);
    if (decision === 'cut') {
      incoming.socket.destroy();
      return;
    }
    if (decision && 'status' in decision) {
      incoming.resume();
      incoming.on('end', () => {
        outgoing.writeHead(decision.status, { connection: 'close', ...decision.headers });
        outgoing.end(decision.body ?? '');
      });
      return;
    }
    const isPut = incoming.method === 'PUT';
    if (isPut) {
      putsInFlight++;
      proxy.maxPutsInFlight = Math.max(proxy.maxPutsInFlight, putsInFlight);
      await new Promise((resolve) => setTimeout(resolve, proxy.putDelayMs));
    }
    const target = new URL(decision?.forwardTo ?? incoming.url!, proxy.target);
    let answered = false;
    const upstream = request(
      target,
      { method: incoming.method, headers: { ...incoming.headers, host: target.host } },
      (answer) => {
        answered = true;
        outgoing.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(outgoing);
        answer.on('end', () => {
          if (isPut) putsInFlight--;
        });
      },
    );
    upstream.on('error', () => {
      // An early answer (a refused PUT) closes the connection while the body is still coming: that
      // answer stands, and the rest of the body is dropped, as a client talking to Coffer sees it.
      if (answered) {
        incoming.unpipe(upstream);
        incoming.resume();
        return;
      }
      if (isPut) putsInFlight--;
      outgoing.destroy();
    });
    incoming.on('error', () => upstream.destroy());
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}

/** The requests seen with this method whose path (without query) matches. */
export const requestsTo = (proxy: HttpProxy, method: string, path: RegExp) =>
  proxy.seen.filter((seen) => seen.method === method && path.test(seen.url.split('?')[0]!));
