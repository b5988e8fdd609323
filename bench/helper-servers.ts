/** The helper servers of the benchmarks (bench/<script>), each in a child process. */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { selfSignedCertificate } from '../test/support/certificate.ts';
import { freePort } from '../test/support/net.ts';
import { databaseFor } from './database.ts';
import { onCleanup, ROOT } from './lib.ts';
import { procCpuSeconds, procStatus, stopChild } from './proc.ts';
import type { ReceiverStats } from './webhook-receiver.ts';
export interface ReferenceServer {
  url: string;
  pid: number;
  /** Current resident set size of its process, in bytes. */
  rss(): number;
  /** The folder of its files. */
  dir: string;
  close(): Promise<void>;
}

/** A helper server of the benchmarks (bench/<script>) in a child process, once it printed `ready`. */
async function startHelper(
  script: string,
  env: Record<string, string>,
): Promise<{ pid: number; close(): Promise<void> }> {
  const child = spawn(process.execPath, [join(ROOT, 'bench', script)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  onCleanup(kill);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-8000);
  });
  await new Promise<void>((ready, fail) => {
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      if (text.includes('ready')) ready();
    });
    child.once('exit', (code) => fail(new Error(`bench/${script} exited with code ${code}:\n${stderr}`)));
  });
  return { pid: child.pid!, close: () => stopChild(child, 5000, kill) };
}

/** Starts bench/reference-server.ts (a minimal node:http object server) in a child process, storing into `dir`. */
export async function startReference(dir: string): Promise<ReferenceServer> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const helper = await startHelper('reference-server.ts', { PORT: String(port), BENCH_REFERENCE_DIR: dir });
  return { url: `http://127.0.0.1:${port}`, dir, rss: () => procStatus(helper.pid, 'VmRSS') ?? 0, ...helper };
}

/**
 * Starts bench/embedded-idle.ts: the embedded database of `dataDir` held open by a bare process, with
 * `env` added to its environment (e.g. the server's malloc thresholds); its RSS.
 */
export async function startEmbeddedIdle(
  dataDir: string,
  env: Record<string, string> = {},
): Promise<{ rss(): number; close(): Promise<void> }> {
  const helper = await startHelper('embedded-idle.ts', { ...env, BENCH_DATA_DIR: dataDir });
  return { rss: () => procStatus(helper.pid, 'VmRSS') ?? 0, ...helper };
}

export interface InsertServer {
  url: string;
  pid: number;
  /** CPU time (user + system) of its process so far, in seconds. */
  cpuSeconds(): number;
  close(): Promise<void>;
}

/**
 * Starts baseline B1, bench/insert-server.ts (a bare Fastify route doing one INSERT), on the run's
 * database: a PostgreSQL database of its own, or PGlite in `dir`.
 */
export async function startInsertServer(dir: string): Promise<InsertServer> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const databaseUrl = await databaseFor(dir);
  const helper = await startHelper('insert-server.ts', {
    PORT: String(port),
    ...(databaseUrl ? { BENCH_B1_DATABASE_URL: databaseUrl } : { BENCH_B1_DATA_DIR: dir }),
  });
  return { url: `http://127.0.0.1:${port}`, cpuSeconds: () => procCpuSeconds(helper.pid), ...helper };
}

export interface WebhookReceiver {
  /** `https://127.0.0.1:<port>` */
  origin: string;
  pid: number;
  /** The receiver's self-signed certificate (PEM) and its file: the CA a client must trust. */
  ca: string;
  caFile: string;
  /** Checks x-coffer-signature of the requests to `path` with `secret` from now on. */
  setSecret(path: string, secret: string): void;
  /** Forgets every request received so far. */
  reset(): void;
  /** What was received since the last reset; the per-request arrays only when `full`. */
  stats(full?: boolean): Promise<ReceiverStats>;
  /** CPU time (user + system) the receiver's process used so far, in seconds. */
  cpuSeconds(): number;
  close(): Promise<void>;
}

/**
 * Starts bench/webhook-receiver.ts (a node:https server answering 200 to every POST, counting and
 * checking signatures) in a child process, with a self-signed certificate made in `dir`.
 */
export async function startWebhookReceiver(dir: string): Promise<WebhookReceiver> {
  const { keyFile, certFile } = selfSignedCertificate(dir);
  const child = spawn(process.execPath, [join(ROOT, 'bench/webhook-receiver.ts')], {
    cwd: ROOT,
    env: { ...process.env, BENCH_RECEIVER_KEY: keyFile, BENCH_RECEIVER_CERT: certFile },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  onCleanup(kill);
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-8000);
  });
  const waiting = new Map<number, (stats: ReceiverStats) => void>();
  let nextId = 0;
  const port = await new Promise<number>((ready, fail) => {
    child.on('message', (message: { type: string; port?: number; id?: number; stats?: ReceiverStats }) => {
      if (message.type === 'ready') ready(message.port!);
      else if (message.type === 'stats') {
        waiting.get(message.id!)?.(message.stats!);
        waiting.delete(message.id!);
      }
    });
    child.once('exit', (code) =>
      fail(new Error(`the webhook receiver exited with code ${code}:\n${stderr}`)),
    );
  });
  const pid = child.pid!;
  return {
    origin: `https://127.0.0.1:${port}`,
    pid,
    ca: readFileSync(certFile, 'utf8'),
    caFile: certFile,
    setSecret: (path, secret) => child.send({ type: 'secret', path, secret }),
    reset: () => child.send({ type: 'reset' }),
    stats: (full = false) =>
      new Promise((answer) => {
        const id = nextId++;
        waiting.set(id, answer);
        child.send({ type: 'stats', id, full });
      }),
    cpuSeconds: () => procCpuSeconds(pid),
    close: () => stopChild(child, 5000, kill),
  };
}
