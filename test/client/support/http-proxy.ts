import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';

export interface Seen {
  method: string;
  /** Path and query, as received. */
  url: string;
  headers: IncomingMessage['headers'];
}

/**
 * What to do with a request: forward it (possibly with another path and query, to the same server),
 * answer it here, or cut the connection.
 */
export type Decision =
  | undefined
  | { forwardTo: string }
  | { status: number; body?: string; headers?: Record<string, string> }
  | 'cut';

export interface EntranceOptions {
  /**
   * Forward the Host header as received rather than the target's: for requests signed for this
   * entrance's host (SigV4 signs Host), which the server behind checks.
   */
  keepHost?: boolean;
  /** Requests forwarded untouched: not recorded in `seen`, not given to `intercept`, not held by `putDelayMs`. */
  bypass?: (request: Seen) => boolean;
}

export interface HttpProxy {
  /** http://127.0.0.1:port */
  url: string;
  /** Where requests go: set once the server behind is up. */
  target: string;
  /** Every request received, by every entrance, in order. */
  seen: Seen[];
  /** Decides each request's fate; forwards all when unset. */
  intercept?: (request: Seen) => Decision | Promise<Decision>;
  /** Holds each PUT this long before forwarding it, so that parallel ones overlap. */
  putDelayMs: number;
  /** The most PUTs forwarded and not yet answered at one moment. */
  maxPutsInFlight: number;
  /**
   * Opens another entrance of this proxy, in front of another server: its requests share `seen`,
   * `intercept`, `putDelayMs` and the PUT count. Returns its URL.
   */
  addEntrance(target: string, options?: EntranceOptions): Promise<string>;
  close(): Promise<void>;
}

/**
 * An HTTP proxy in front of Coffer (API and object URLs alike), and of the object store where that
 * one serves the object URLs, that a test steers request by request. The method, path and query,
 * headers and body of a request are forwarded as received (only Host is the target's, unless
 * `keepHost`).
 */
export async function startHttpProxy(): Promise<HttpProxy> {
  let putsInFlight = 0;
  const servers: Server[] = [];

  async function handle(
    incoming: IncomingMessage,
    outgoing: ServerResponse,
    target: URL,
    options: EntranceOptions,
  ): Promise<void> {
    const seen: Seen = { method: incoming.method!, url: incoming.url!, headers: incoming.headers };
    const bypass = options.bypass?.(seen) ?? false;
    if (!bypass) proxy.seen.push(seen);
    let decision: Decision;
    try {
      decision = bypass ? undefined : await proxy.intercept?.(seen);
    } catch (error) {
      // A broken rule: the client gets no answer, and the error surfaces in the test run.
      incoming.socket.destroy();
      throw error;
    }
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
    const isPut = incoming.method === 'PUT' && !bypass;
    if (isPut) {
      putsInFlight++;
      proxy.maxPutsInFlight = Math.max(proxy.maxPutsInFlight, putsInFlight);
      await new Promise((resolve) => setTimeout(resolve, proxy.putDelayMs));
    }
    // The headers as received, names, order and repeats included; Host the target's unless kept.
    const headers = [...incoming.rawHeaders];
    if (!options.keepHost) {
      for (let index = 0; index < headers.length; index += 2)
        if (headers[index]!.toLowerCase() === 'host') headers[index + 1] = target.host;
    }
    let answered = false;
    const upstream = request(
      {
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port,
        // As received: not parsed again, so nothing in it is normalized or encoded differently.
        path: decision?.forwardTo ?? incoming.url!,
        method: incoming.method,
        headers,
      },
      (answer) => {
        answered = true;
        outgoing.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(outgoing);
        answer.on('end', () => {
          if (isPut) putsInFlight--;
          // An early answer (a refused PUT) while the body is still coming: that answer stands, and
          // the rest of the body is dropped. Coffer closes the connection; radosgw may keep it open
          // without reading on, which would hold the rest of the body (and the client) forever.
          if (!incoming.complete) dropRest();
        });
      },
    );
    const dropRest = () => {
      incoming.unpipe(upstream);
      incoming.resume();
      upstream.destroy();
    };
    upstream.on('error', () => {
      if (answered) {
        dropRest();
        return;
      }
      if (isPut) putsInFlight--;
      outgoing.destroy();
    });
    incoming.on('error', () => upstream.destroy());
    incoming.pipe(upstream);
  }

  async function listen(target: () => string, options: EntranceOptions): Promise<string> {
    const server = createServer((incoming, outgoing) =>
      handle(incoming, outgoing, new URL(target()), options),
    );
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  const proxy: HttpProxy = {
    url: '',
    target: '',
    seen: [],
    putDelayMs: 0,
    maxPutsInFlight: 0,
    addEntrance: (target, options = {}) => listen(() => target, options),
    close: () =>
      Promise.all(
        servers.map(
          (server) =>
            new Promise<void>((resolve) => {
              server.closeAllConnections();
              server.close(() => resolve());
            }),
        ),
      ).then(() => {}),
  };
  proxy.url = await listen(() => proxy.target, {});
  return proxy;
}

/** The requests seen with this method whose path (without query) matches. */
export const requestsTo = (proxy: HttpProxy, method: string, path: RegExp) =>
  proxy.seen.filter((seen) => seen.method === method && path.test(seen.url.split('?')[0]!));
