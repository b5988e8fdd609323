import { connect, createServer, type Server, type Socket } from 'node:net';

/** A TCP proxy to a real service that a test can cut and restore, to see dependencies go away and come back. */
export interface Proxy {
  port: number;
  /** Drops every connection and stops accepting new ones. */
  cut(): Promise<void>;
  /** Keeps every connection open but passes nothing any more, new ones included: a service that hangs. */
  freeze(): void;
  /** Passes again what every connection sent meanwhile, and what comes next: the service answers again. */
  thaw(): void;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startProxy(targetHost: string, targetPort: number): Promise<Proxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  let frozen = false;
  const pipes = new Set<{ client: Socket; upstream: Socket }>();
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(targetPort, targetHost);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          socket.on('error', () => {
            client.destroy();
            upstream.destroy();
          });
        }
        const pipe = { client, upstream };
        pipes.add(pipe);
        client.on('close', () => pipes.delete(pipe));
        if (!frozen) client.pipe(upstream).pipe(client);
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as { port: number }).port;
        resolve();
      });
    });
  const cut = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  };
  await listen();
  return {
    get port() {
      return port;
    },
    cut,
    freeze() {
      frozen = true;
      for (const { client, upstream } of pipes) {
        client.unpipe(upstream);
        upstream.unpipe(client);
      }
    },
    thaw() {
      frozen = false;
      for (const { client, upstream } of pipes) client.pipe(upstream).pipe(client);
    },
    restore: listen,
    close: cut,
  };
}
