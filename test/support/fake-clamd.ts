import { createServer, type Server, type Socket } from 'node:net';

export interface FakeClamd {
  port: number;
  /** Resolves when a scan's first bytes arrived (INSTREAM). */
  scanning: Promise<void>;
  close(): Promise<void>;
}

/**
 * A minimal clamd on `port` (127.0.0.1): `clean` answers every INSTREAM `stream: OK` once its
 * terminating zero-length chunk arrived; `hang` reads and never answers, as a clamd that stalls.
 */
export async function startFakeClamd(port: number, mode: 'clean' | 'hang'): Promise<FakeClamd> {
  const sockets = new Set<Socket>();
  let started: () => void = () => {};
  const scanning = new Promise<void>((resolve) => {
    started = resolve;
  });
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let received = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.includes('INSTREAM')) started();
      if (mode === 'clean' && received.subarray(-4).equals(Buffer.alloc(4))) socket.end('stream: OK\0');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    scanning,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
