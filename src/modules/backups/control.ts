import { chmod, rm } from 'node:fs/promises';
import { createConnection, createServer, type Socket } from 'node:net';
import { isAbsolute, join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import type { Services } from '../../services.ts';
import { type BackupSummary, createBackup } from './backup.ts';
import { BackupError } from './manifest.ts';

/**
 * The local control channel of the process that holds the embedded database: a unix socket in the
 * data dir, open to the user it runs as (mode 0600), through which `coffer backup` asks it for a
 * backup while it runs. Reaching it takes access to the data dir, which holds the very bytes a
 * backup copies, so it needs no key. One request per connection: a JSON line, answered by one.
 */

/** `withSecretKey`: include the server key the process holding the database runs with. */
export type ControlRequest = { command: 'backup'; dir: string; withSecretKey?: boolean };
export type ControlReply = { ok: true; backup: BackupSummary } | { ok: false; error: string };

/** Unix socket paths are short (108 bytes on Linux, 104 on macOS, the end byte included). */
const MAX_SOCKET_PATH = 103;
const MAX_REQUEST_BYTES = 64 * 1024;

export const controlSocketPath = (dataDir: string) => join(dataDir, 'coffer.sock');

/** Reads one line (a JSON request or reply) from `socket`. */
function readLine(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    socket.setEncoding('utf8');
    const onData = (chunk: string) => {
      text += chunk;
      const end = text.indexOf('\n');
      if (end >= 0) {
        socket.off('data', onData);
        resolve(text.slice(0, end));
      } else if (text.length > MAX_REQUEST_BYTES) {
        reject(new Error('request too long'));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('the connection closed')));
  });
}

function parseRequest(line: string): ControlRequest {
  const request = JSON.parse(line) as ControlRequest;
  if (
    request?.command !== 'backup' ||
    typeof request.dir !== 'string' ||
    !isAbsolute(request.dir) ||
    !['undefined', 'boolean'].includes(typeof request.withSecretKey)
  ) {
    throw new BackupError('Unknown control request');
  }
  return request;
}

/**
 * Serves backups on the data dir's control socket while this process holds the embedded database;
 * nothing on PostgreSQL. close() aborts backups in progress (their folders are emptied).
 */
export async function serveBackups(
  config: Pick<Config, 'dataDir' | 'databaseUrl'>,
  services: Pick<Services, 'db' | 'store' | 'secretKey'>,
  logger: Logger,
): Promise<{ close(): Promise<void> }> {
  const none = { close: async () => {} };
  if (config.databaseUrl) return none;
  const path = controlSocketPath(config.dataDir);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    logger.warn(
      { path },
      'data dir path too long for its control socket: coffer backup needs the server stopped',
    );
    return none;
  }
  const sockets = new Set<Socket>();
  const server = createServer(async (socket) => {
    const abort = new AbortController();
    sockets.add(socket);
    // A client that goes away (Ctrl-C) ends its backup.
    socket.once('close', () => {
      sockets.delete(socket);
      abort.abort();
    });
    socket.on('error', () => {});
    let reply: ControlReply;
    try {
      const request = parseRequest(await readLine(socket));
      logger.info({ dir: request.dir }, 'backup started');
      const backup = await createBackup(services.db, services.store, request.dir, abort.signal, {
        secretKey: request.withSecretKey ? services.secretKey : undefined,
      });
      logger.info({ ...backup }, 'backup written');
      reply = { ok: true, backup };
    } catch (error) {
      if (!(error instanceof BackupError)) logger.error({ err: error }, 'backup failed');
      reply = { ok: false, error: (error as Error).message };
    }
    if (!socket.destroyed) socket.end(`${JSON.stringify(reply)}\n`);
  });
  try {
    // This process holds the database: a socket file there was left by a holder that was killed.
    await rm(path, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, resolve);
    });
    await chmod(path, 0o600);
  } catch (error) {
    logger.warn({ err: error, path }, 'control socket unavailable: coffer backup needs the server stopped');
    server.close();
    return none;
  }
  return {
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
      await rm(path, { force: true });
    },
  };
}

/** Asks the process holding the embedded database of `dataDir` for `request`, and waits for its answer. */
export async function askServer(
  dataDir: string,
  request: ControlRequest,
  signal?: AbortSignal,
): Promise<BackupSummary> {
  const path = controlSocketPath(dataDir);
  const socket = createConnection(path);
  // Going away is how a client stops its request: the server aborts it.
  signal?.addEventListener('abort', () => socket.destroy(), { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
  } catch (error) {
    throw new BackupError(
      `The embedded database in ${dataDir} is held by a Coffer process that does not answer on ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'}): stop it and run coffer backup again`,
    );
  }
  socket.write(`${JSON.stringify(request)}\n`);
  let reply: ControlReply;
  try {
    reply = JSON.parse(await readLine(socket)) as ControlReply;
  } catch (error) {
    throw new BackupError(
      `The Coffer process holding ${dataDir} gave no answer: ${(error as Error).message}`,
    );
  } finally {
    socket.end();
  }
  if (!reply.ok) throw new BackupError(reply.error);
  return reply.backup;
}
