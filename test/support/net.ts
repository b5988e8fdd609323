import { createServer } from 'node:net';

/** Ports each vitest worker draws from, below the system's range for outgoing connections (32768 up). */
const PORTS_PER_WORKER = 1000;
const FIRST_PORT = 12000;
const WORKER_RANGES = 20;
/** Ports this process handed out lately: not handed again while a server may still be starting on one. */
const recent: number[] = [];
const RECENT = 100;

/**
 * The port to try: in a vitest worker, a random one of the worker's own range, so that two workers
 * never hand out the same port to servers starting at the same moment (the system's free port for
 * both, and one server's health check answered by the other's); elsewhere, the system's choice.
 */
function candidate(): number {
  const worker = Number(process.env.VITEST_POOL_ID);
  if (!worker) return 0;
  const base = FIRST_PORT + ((worker - 1) % WORKER_RANGES) * PORTS_PER_WORKER;
  return base + Math.floor(Math.random() * PORTS_PER_WORKER);
}

function tryPort(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' ? resolve(undefined) : reject(error),
    );
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

/** A loopback port that was free a moment ago, and that no other test worker is handed meanwhile. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await tryPort(candidate());
    if (port === undefined || recent.includes(port)) continue;
    recent.push(port);
    if (recent.length > RECENT) recent.shift();
    return port;
  }
}
