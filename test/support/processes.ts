import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { TEST_SECRET_KEY } from './backends.ts';

const root = join(import.meta.dirname, '../..');

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface LogLine {
  msg?: string;
  [key: string]: unknown;
}

/** A `coffer serve` or `coffer worker` child process and what it printed. */
export interface CofferProcess {
  name: string;
  child: ChildProcess;
  /** Base URL of the API (from PORT; meaningful for serve). */
  url: string;
  /** stdout's JSON log lines. */
  logs: LogLine[];
  stderr: string;
  exited(): boolean;
}

/** Every process started and not yet stopped: a test's afterAll stops them all with stopAll(). */
const running = new Set<CofferProcess>();

export function startProcess(
  name: string,
  command: 'serve' | 'worker',
  env: Record<string, string>,
): CofferProcess {
  // On PostgreSQL the server key must be set (the same for every process of the database).
  const secretKey = env.COFFER_DATABASE_URL ? { COFFER_SECRET_KEY: TEST_SECRET_KEY } : {};
  const child = spawn(process.execPath, ['src/main.ts', command], {
    cwd: root,
    env: { ...process.env, ...secretKey, ...env },
  });
  const node: CofferProcess = {
    name,
    child,
    url: `http://127.0.0.1:${env.PORT}`,
    logs: [],
    stderr: '',
    exited: () => child.exitCode !== null || child.signalCode !== null,
  };
  running.add(node);
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      try {
        node.logs.push(JSON.parse(line) as LogLine);
      } catch {
        // not a log line
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    node.stderr += chunk;
  });
  return node;
}

/** Fails at once when a running process died, with what it said. */
export function checkAlive(): void {
  for (const node of running) {
    if (node.exited()) {
      throw new Error(
        `${node.name} exited (${node.child.exitCode ?? node.child.signalCode}): ${node.stderr}`,
      );
    }
  }
}

/**
 * Polls `check` until it returns something other than undefined/false, or fails after `timeoutMs`;
 * fails at once when a running process died.
 */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    checkAlive();
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** Waits until `node` answers /health/ready with 200. */
export async function ready(node: CofferProcess, timeoutMs = 45_000): Promise<void> {
  await until(
    `${node.name} to be ready`,
    async () => (await fetch(`${node.url}/health/ready`).catch(() => undefined))?.status === 200,
    timeoutMs,
  );
}

/** SIGKILL (a crash: nothing runs on the way out) and wait until it is gone. */
export async function kill(node: CofferProcess): Promise<void> {
  running.delete(node);
  if (node.exited()) return;
  const exited = new Promise((resolve) => node.child.once('exit', resolve));
  node.child.kill('SIGKILL');
  await exited;
}

/** Waits for a process that is expected to end by itself (e.g. one that hit a failpoint). */
export async function exitOf(node: CofferProcess, timeoutMs = 30_000): Promise<string> {
  running.delete(node);
  if (!node.exited()) {
    await Promise.race([
      new Promise((resolve) => node.child.once('exit', resolve)),
      sleep(timeoutMs).then(() => {
        throw new Error(`${node.name} did not exit within ${timeoutMs} ms`);
      }),
    ]);
  }
  return String(node.child.exitCode ?? node.child.signalCode);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...running].map(kill));
}
