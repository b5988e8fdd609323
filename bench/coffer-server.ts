/** A Coffer server of a benchmark run: a child process by default, or in this process. */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { freePort } from '../test/support/net.ts';
import { agent } from './client.ts';
import { databaseFor } from './database.ts';
import { ADMIN_KEY, onCleanup, ROOT } from './lib.ts';
import { procCpuSeconds, procStatus, resetPeakOf, stopChild } from './proc.ts';

/** COFFER_SECRET_KEY of the servers a run starts on PostgreSQL. */
const BENCH_SECRET_KEY = Buffer.alloc(32, 'bench').toString('base64');

export type ServerMode = 'child' | 'in-process';

export interface CofferServer {
  url: string;
  mode: ServerMode;
  pid: number;
  dataDir: string;
  /** Current resident set size of the server's process, in bytes. */
  rss(): number;
  /** Resets the kernel's peak RSS (VmHWM) of the server's process; false when not possible. */
  resetPeak(): boolean;
  /** The kernel's peak RSS since the last reset, in bytes. */
  peak(): number | undefined;
  /** CPU time (user + system) the server's process used so far, in seconds. */
  cpuSeconds(): number;
  /** Seconds from its start (the spawn of a child) to the first 200 of /health/ready. */
  startSeconds: number;
  close(): Promise<void>;
}

async function waitReady(url: string, child: ChildProcess | undefined, stderr: () => string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child && child.exitCode !== null) {
      throw new Error(`the Coffer server exited with code ${child.exitCode} before ready:\n${stderr()}`);
    }
    try {
      const response = await request(`${url}/health/ready`, { dispatcher: agent });
      await response.body.dump();
      if (response.statusCode === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the Coffer server was not ready within 120 s:\n${stderr()}`);
    await sleep(20);
  }
}

/**
 * Starts Coffer on a free port of 127.0.0.1 with the run's database (embedded PGlite in `dataDir`, or a
 * PostgreSQL database of its own for `dataDir`: bench/database.ts), the admin key
 * ADMIN_KEY and silent logs, and waits for /health/ready. `child` (the default) runs `src/main.ts serve`
 * (API and workers) in its own process, so that its memory and CPU are measured apart from the client's.
 */
export async function startCoffer(
  dataDir: string,
  mode: ServerMode,
  options: CofferOptions = {},
): Promise<CofferServer> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const databaseUrl = await databaseFor(dataDir);
  const env: Record<string, string> = {
    PORT: String(port),
    HOST: '127.0.0.1',
    COFFER_PUBLIC_URL: url,
    COFFER_DATA_DIR: dataDir,
    COFFER_ADMIN_KEY: ADMIN_KEY,
    COFFER_LOG_LEVEL: 'silent',
    // PostgreSQL deployments must set the server key; the embedded one makes its own in the data dir.
    ...(databaseUrl ? { COFFER_DATABASE_URL: databaseUrl, COFFER_SECRET_KEY: BENCH_SECRET_KEY } : {}),
    ...options.env,
  };
  return mode === 'child'
    ? startChild(url, dataDir, env, options)
    : startInProcess(url, dataDir, env, options);
}

/** What a benchmark may add to a Coffer server of its own (the shared one of bench/run.ts takes none). */
export interface CofferOptions {
  /** More COFFER_… variables (e.g. COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS). */
  env?: Record<string, string>;
  /**
   * A PEM file of CA certificates trusted for webhook receivers: NODE_EXTRA_CA_CERTS of the child,
   * or the runtime's webhookCa in this process.
   */
  caFile?: string;
  /**
   * In this process, whether to run the background workers as `serve` does (webhook dispatcher,
   * pipeline, …); default false. A child always runs them.
   */
  workers?: boolean;
}

async function startChild(
  url: string,
  dataDir: string,
  env: Record<string, string>,
  options: CofferOptions = {},
): Promise<CofferServer> {
  // Nothing of the caller's Coffer configuration (an external database, Redis, clamd) leaks in.
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('COFFER_')),
  ) as Record<string, string>;
  // COFFER_BENCH_SERVER_NODE_ARGS: Node.js options for the server only, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`
  // (a profile per server process, written when it stops).
  const nodeArgs = process.env.COFFER_BENCH_SERVER_NODE_ARGS?.trim().split(/\s+/).filter(Boolean) ?? [];
  const started = performance.now();
  const child = spawn(process.execPath, [...nodeArgs, join(ROOT, 'src/main.ts'), 'serve'], {
    cwd: ROOT,
    env: { ...inherited, ...env, ...(options.caFile ? { NODE_EXTRA_CA_CERTS: options.caFile } : {}) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-8000);
  });
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  onCleanup(kill);
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not start the Coffer server process');
  await waitReady(url, child, () => stderr);
  const startSeconds = (performance.now() - started) / 1000;
  return {
    url,
    mode: 'child',
    pid,
    dataDir,
    startSeconds,
    rss: () => procStatus(pid, 'VmRSS') ?? 0,
    resetPeak: () => resetPeakOf(pid),
    peak: () => procStatus(pid, 'VmHWM'),
    cpuSeconds: () => procCpuSeconds(pid),
    close: () => stopChild(child, 10_000, kill),
  };
}

async function startInProcess(
  url: string,
  dataDir: string,
  env: Record<string, string>,
  options: CofferOptions = {},
): Promise<CofferServer> {
  const started = performance.now();
  const [{ buildApp }, { loadConfig }, { openRuntime }, { startWorkers }, { default: pino }] =
    await Promise.all([
      import('../src/app.ts'),
      import('../src/config.ts'),
      import('../src/runtime.ts'),
      import('../src/workers.ts'),
      import('pino'),
    ]);
  const config = loadConfig(env);
  const logger = pino({ level: 'silent' });
  const runtime = await openRuntime(config, {
    logger,
    ...(options.caFile ? { webhookCa: readFileSync(options.caFile, 'utf8') } : {}),
  });
  const app = await buildApp({ config, services: runtime.services });
  const workers = options.workers ? startWorkers(runtime.services.workers(), logger) : undefined;
  await app.listen({ port: config.port, host: config.host });
  await waitReady(url, undefined, () => '');
  return {
    url,
    mode: 'in-process',
    pid: process.pid,
    dataDir,
    startSeconds: (performance.now() - started) / 1000,
    rss: () => process.memoryUsage().rss,
    resetPeak: () => resetPeakOf('self'),
    peak: () => procStatus('self', 'VmHWM'),
    cpuSeconds: () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1e6;
    },
    async close() {
      await app.close();
      await workers?.stop();
      await runtime.close();
    },
  };
}
