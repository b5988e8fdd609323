/**
 * Shared machinery of the benchmarks: a Coffer server (a child process by default, or in this process),
 * an HTTP client, raw disk baselines, process memory and CPU probes, statistics and the result table.
 * Every benchmark module (bench/uploads.ts, …) exports a `Bench` that bench/run.ts runs.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { rm, rmdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { selfSignedCertificate } from '../test/support/certificate.ts';
import { freePort } from '../test/support/net.ts';
import { type DbKind, databaseFor } from './database.ts';
import type { ReceiverStats } from './webhook-receiver.ts';

export const KiB = 1024;
export const MiB = 1024 * 1024;
export const ROOT = resolve(import.meta.dirname, '..');
export const ADMIN_KEY = `coffer_admin_${'b'.repeat(43)}`;
/** COFFER_SECRET_KEY of the servers a run starts on PostgreSQL. */
const BENCH_SECRET_KEY = Buffer.alloc(32, 'bench').toString('base64');

// ---------------------------------------------------------------------------------------------- output

export function out(line = ''): void {
  process.stdout.write(`${line}\n`);
}

/** A progress line on stderr, so that stdout keeps only the results. */
export function progress(line: string): void {
  process.stderr.write(`  … ${line}\n`);
}

// --------------------------------------------------------------------------------------------- cleanup

const cleanups: (() => void)[] = [];

/** Registers a synchronous cleanup, run once at exit (normal, error or signal), newest first. */
export function onCleanup(cleanup: () => void): void {
  cleanups.push(cleanup);
}

export function cleanupNow(): void {
  for (let cleanup = cleanups.pop(); cleanup; cleanup = cleanups.pop()) {
    try {
      cleanup();
    } catch {
      // keep cleaning the rest
    }
  }
}

process.on('exit', cleanupNow);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
    cleanupNow();
    process.exit(130);
  });
}

/** A fresh scratch folder under the project's .tmp/ (git-ignored), removed at exit. */
export function scratchDir(prefix: string): string {
  const parent = join(ROOT, '.tmp');
  mkdirSync(parent, { recursive: true });
  const dir = mkdtempSync(join(parent, `${prefix}-`));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---------------------------------------------------------------------------------------------- server

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

function procStatus(pid: number | 'self', field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
    );
    return match ? Number(match[1]) * KiB : undefined;
  } catch {
    return undefined;
  }
}

function resetPeakOf(pid: number | 'self'): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

const CLOCK_TICKS = 100;

/**
 * CPU seconds the whole machine has spent busy since it booted (every process, user and kernel time;
 * not idle nor waiting for I/O): the first line of /proc/stat.
 */
export function machineBusySeconds(): number {
  const [line] = readFileSync('/proc/stat', 'utf8').split('\n', 1);
  const [user, nice, system, , , irq, softirq, steal] = line!.trim().split(/\s+/).slice(1).map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / CLOCK_TICKS;
}

function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
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

// ------------------------------------------------------------------------------------------------ http

/** The client's connection pool: keep-alive, no timeouts (a 1 GiB body may take a while). */
export const agent = new Agent({
  connections: 64,
  keepAliveTimeout: 60_000,
  headersTimeout: 0,
  bodyTimeout: 0,
});

export interface Reply<T = any> {
  status: number;
  body: T;
}

/** A JSON API call; the answer's body is parsed when it is JSON. */
export async function call<T = any>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  options: { token?: string; body?: unknown } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await request(url, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    dispatcher: agent,
  });
  const text = await response.body.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: response.statusCode, body: body as T };
}

/** Fails with the whole answer when its status is not the expected one. */
export function expectStatus(reply: Reply, status: number, what: string): void {
  if (reply.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${reply.status} ${JSON.stringify(reply.body)}`);
  }
}

export interface Project {
  id: string;
  key: string;
  /** Calls `/v1/projects/{id}{path}` with the project's API key. */
  api<T = any>(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<Reply<T>>;
}

/** A new organization and project (with `settings`) and an API key with every scope, made with the admin key. */
export async function createProject(
  server: CofferServer,
  settings: Record<string, unknown> = {},
): Promise<Project> {
  const admin = { token: ADMIN_KEY };
  const org = await call('POST', `${server.url}/v1/organizations`, { ...admin, body: { name: 'Bench org' } });
  expectStatus(org, 201, 'create organization');
  const project = await call('POST', `${server.url}/v1/organizations/${org.body.id}/projects`, {
    ...admin,
    body: { name: 'Bench project', settings },
  });
  expectStatus(project, 201, 'create project');
  const key = await call('POST', `${server.url}/v1/projects/${project.body.id}/api-keys`, {
    ...admin,
    body: {
      name: 'bench',
      scopes: ['files:upload', 'files:read', 'files:download', 'files:delete', 'projects:read'],
    },
  });
  expectStatus(key, 201, 'create API key');
  const id = project.body.id as string;
  const token = key.body.key as string;
  return {
    id,
    key: token,
    api: (method, path, body) => call(method, `${server.url}/v1/projects/${id}${path}`, { token, body }),
  };
}

/**
 * Deletes every file of `project` (page by page through the API), then removes their stored objects
 * from the local store under the server's data directory at once: a DELETE is soft, and the server's
 * collector would keep the bytes for the grace period (COFFER_GC_GRACE_SECONDS, a day by default).
 * Answers the number of files removed. Only for the local store (`objects/` of `server.dataDir`).
 */
export async function purgeFiles(server: CofferServer, project: Project, concurrency = 16): Promise<number> {
  let removed = 0;
  for (;;) {
    const page = await project.api<{ items: { id: string; storage_key: string }[] }>(
      'GET',
      '/files?limit=200',
    );
    expectStatus(page, 200, 'list files');
    const files = page.body.items;
    if (files.length === 0) return removed;
    await pool(files.length, concurrency, async (i) => {
      const file = files[i]!;
      expectStatus(await project.api('DELETE', `/files/${file.id}`), 200, `delete ${file.id}`);
      const segments = file.storage_key.split('/');
      const path = join(server.dataDir, 'objects', ...segments);
      await Promise.all(
        [path, `${path}.meta.json`, `${path}.parts`].map((target) =>
          rm(target, { recursive: true, force: true }),
        ),
      );
      // The folders the key leaves empty, as the store's own delete does (a folder still in use stays).
      for (let depth = segments.length - 1; depth > 0; depth--) {
        try {
          await rmdir(join(server.dataDir, 'objects', ...segments.slice(0, depth)));
        } catch {
          break;
        }
      }
    });
    removed += files.length;
  }
}

// ------------------------------------------------------------------------------------------- raw disk

/** Commands running now (dd), killed at exit so that none outlives an interrupted run. */
const commands = new Set<ChildProcess>();
onCleanup(() => {
  for (const child of commands) child.kill('SIGKILL');
});

function runCommand(command: string, args: string[]): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    commands.add(child);
    child.once('exit', () => commands.delete(child));
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    child.once('error', fail);
    child.once('exit', (code) =>
      code === 0 ? done() : fail(new Error(`${command} ${args.join(' ')}: exit ${code}\n${stderr}`)),
    );
  });
}

/** Flushes dirty pages, then drops the page cache; false when the kernel refuses (not root). */
export function dropCaches(): boolean {
  spawnSync('sync');
  try {
    writeFileSync('/proc/sys/vm/drop_caches', '3');
    return true;
  } catch {
    return false;
  }
}

/** Seconds `dd` takes to write `mib` MiB of zeros to `path` and fdatasync it. */
export async function rawWrite(path: string, mib: number): Promise<number> {
  const start = performance.now();
  await runCommand('dd', ['if=/dev/zero', `of=${path}`, 'bs=1M', `count=${mib}`, 'conv=fdatasync']);
  return (performance.now() - start) / 1000;
}

/** Seconds `dd` takes to read `path` to /dev/null. */
export async function rawRead(path: string): Promise<number> {
  const start = performance.now();
  await runCommand('dd', [`if=${path}`, 'of=/dev/null', 'bs=1M']);
  return (performance.now() - start) / 1000;
}

// -------------------------------------------------------------------------------------------- measure

export interface Measurement<T> {
  result: T;
  seconds: number;
  /** CPU seconds of the server's process and of this (client) process during the run. */
  serverCpu: number;
  clientCpu: number;
  /** CPU seconds of the whole machine during the run: server, client, database and anything else. */
  machineCpu: number;
  memory: { before: number; peak: number; after: number };
}

/**
 * Runs `work`, timing it and sampling the server's RSS every few ms (plus the kernel's peak counter,
 * reset at the start, when available). `after` is read `settleMs` after the end.
 */
export async function measure<T>(
  server: CofferServer,
  work: () => Promise<T>,
  settleMs = 500,
): Promise<Measurement<T>> {
  const peakReset = server.resetPeak();
  const before = server.rss();
  let sampled = before;
  const sampler = setInterval(() => {
    sampled = Math.max(sampled, server.rss());
  }, 10);
  const serverCpu = server.cpuSeconds();
  const clientCpu = process.cpuUsage();
  const machineCpu = machineBusySeconds();
  const start = performance.now();
  let result: T;
  try {
    result = await work();
  } finally {
    clearInterval(sampler);
  }
  const seconds = (performance.now() - start) / 1000;
  const machineCpuUsed = machineBusySeconds() - machineCpu;
  const serverCpuUsed = server.cpuSeconds() - serverCpu;
  const clientUsage = process.cpuUsage(clientCpu);
  const kernelPeak = peakReset ? (server.peak() ?? 0) : 0;
  const peak = Math.max(sampled, kernelPeak, server.rss());
  await sleep(settleMs);
  return {
    result,
    seconds,
    serverCpu: serverCpuUsed,
    clientCpu: (clientUsage.user + clientUsage.system) / 1e6,
    machineCpu: machineCpuUsed,
    memory: { before, peak, after: server.rss() },
  };
}

// ------------------------------------------------------------------------------------------------ stats

export function median(values: number[]): number {
  return percentile(values, 50);
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (rank - low);
}

export function mean(values: number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** Runs `task(i)` for i in [0, count) with at most `concurrency` in flight. */
export async function pool(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < count; i = next++) await task(i);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}

export const fmt = {
  mib: (bytes: number) => `${(bytes / MiB).toFixed(bytes < 10 * MiB ? 1 : 0)} MiB`,
  rate: (mibPerSecond: number) => `${mibPerSecond.toFixed(0)} MiB/s`,
  perSecond: (value: number, unit: string) => `${value.toFixed(0)} ${unit}/s`,
  ratio: (value: number) => `${(value * 100).toFixed(0)}%`,
  ms: (value: number) => `${value.toFixed(value < 10 ? 2 : 1)} ms`,
  size: (mib: number) => (mib >= 1024 && mib % 1024 === 0 ? `${mib / 1024} GiB` : `${mib} MiB`),
};

// ------------------------------------------------------------------------------------------------ table

/** SIGTERM, then `kill` (SIGKILL and clean-up) once the child has exited or `graceMs` passed. */
async function stopChild(child: ChildProcess, graceMs: number, kill: () => void): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(graceMs)]);
  kill();
}

/** The table row of server memory kept after a benchmark's transfers, against `limit`. */
export function retainedRssRow(benchmark: string, startRss: number, endRss: number, limit: number): Row {
  return {
    benchmark,
    coffer: `${endRss >= startRss ? '+' : '−'}${fmt.mib(Math.abs(endRss - startRss))}`,
    baseline: `${fmt.mib(startRss)} → ${fmt.mib(endRss)}`,
    target: `< ${fmt.mib(limit)}`,
    met: endRss - startRss < limit,
  };
}

export interface Row {
  benchmark: string;
  coffer: string;
  baseline?: string;
  /** coffer / baseline, printed as a percentage. */
  ratio?: number;
  target?: string;
  met?: boolean;
  /** The measured number and its unit, for --json; read from `coffer` ("170 uploads/s") when absent. */
  value?: number;
  unit?: string;
}

/** The leading number of a table cell and the unit after it ("−12 MiB" → −12, "MiB"). */
function quantity(text: string | undefined): { value?: number; unit?: string } {
  const match = /^([+−-]?)(\d+(?:\.\d+)?)\s*(.*)$/.exec(text?.trim() ?? '');
  if (!match) return {};
  return {
    value: Number(match[2]) * (match[1] === '−' || match[1] === '-' ? -1 : 1),
    unit: match[3] || undefined,
  };
}

/** Every row as data: what `--json FILE` writes, so that runs can be compared. */
export function jsonRows(sections: Section[]) {
  return sections.flatMap((section) =>
    section.rows.map((row) => {
      const measured = row.value === undefined ? quantity(row.coffer) : { value: row.value, unit: row.unit };
      return {
        section: section.title,
        name: row.benchmark.trim(),
        value: measured.value ?? null,
        unit: measured.unit ?? null,
        text: row.coffer,
        baseline: row.baseline ?? null,
        baseline_value: quantity(row.baseline).value ?? null,
        ratio: row.ratio ?? null,
        target: row.target ?? null,
        met: row.met ?? null,
      };
    }),
  );
}

export interface Section {
  title: string;
  rows: Row[];
  notes: string[];
}

export function printTable(sections: Section[]): void {
  const header = ['benchmark', 'coffer', 'baseline (same run)', 'ratio', 'target', 'met'];
  const cells = (row: Row) => [
    row.benchmark,
    row.coffer,
    row.baseline ?? '',
    row.ratio === undefined ? '' : fmt.ratio(row.ratio),
    row.target ?? '',
    row.met === undefined ? '' : row.met ? 'yes' : 'NO',
  ];
  const all = sections.flatMap((section) => section.rows.map(cells));
  const widths = header.map((title, column) =>
    Math.max(title.length, ...all.map((line) => line[column]!.length)),
  );
  const line = (values: string[]) =>
    `| ${values.map((value, column) => (column === 0 || column === 5 ? value.padEnd(widths[column]!) : value.padStart(widths[column]!))).join(' | ')} |`;
  const rule = `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`;
  for (const section of sections) {
    out();
    out(`## ${section.title}`);
    out();
    out(line(header));
    out(rule);
    for (const row of section.rows) out(line(cells(row)));
    if (section.notes.length > 0) out();
    for (const note of section.notes) out(`- ${note}`);
  }
}

// -------------------------------------------------------------------------------------------- modules

export interface BenchContext {
  server: CofferServer;
  /** The database of every Coffer server of the run (`--db`). */
  db: DbKind;
  /** `--name value` options of the command line that are not the runner's own (e.g. `--files` of list). */
  options: Map<string, string>;
  /** A scratch folder on the same filesystem as the server's data directory (raw baselines go here). */
  scratch: string;
  /** The large transfer size, in MiB (COFFER_BENCH_SIZE_MB, default 1024). */
  sizeMib: number;
  /** Repetitions of each large measurement (COFFER_BENCH_ROUNDS, default 3). */
  rounds: number;
  /** Whether the page cache can be dropped (root): reads are then cold on both sides. */
  canDropCaches: boolean;
}

export interface Bench {
  name: string;
  description: string;
  run(context: BenchContext): Promise<Section[]>;
}

export function envInteger(name: string, fallback: number, min = 1): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min)
    throw new Error(`${name}: expected an integer ≥ ${min}, got ${raw}`);
  return value;
}
