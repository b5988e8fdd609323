import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './net.ts';
import { sleep } from './processes.ts';

/**
 * Services of a test's own that it may stop, crash and restart without touching the shared ones
 * other tests use: a PostgreSQL cluster (Debian's binaries, run as the postgres user) and a Redis.
 */

export interface PrivateService {
  url: string;
  /** PostgreSQL: a fast shutdown; Redis: SIGKILL. start() brings it back on the same port and data. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const version = readdirSync(root).sort().at(-1);
  const bin = version && join(root, version, 'bin');
  return bin && existsSync(join(bin, 'initdb')) ? bin : undefined;
}

/** Why a private Redis cannot run here, or undefined when it can. */
export function privateRedisUnavailable(): string | undefined {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'no redis-server on PATH';
  }
}

/** Why a private PostgreSQL cannot run here, or undefined when it can. */
export function privatePostgresUnavailable(): string | undefined {
  if (!postgresBin()) return 'no PostgreSQL server binaries under /usr/lib/postgresql';
  if (process.getuid?.() === 0) {
    try {
      execFileSync('id', ['postgres'], { stdio: 'ignore' });
    } catch {
      return 'running as root without a postgres user for initdb';
    }
  }
  return undefined;
}

export async function startPrivatePostgres(): Promise<PrivateService> {
  const bin = postgresBin()!;
  const dir = mkdtempSync(join(tmpdir(), 'coffer-pg-'));
  const asRoot = process.getuid?.() === 0;
  // initdb refuses to run as root: the cluster belongs to the postgres user then.
  const run = (command: string, args: string[]) =>
    asRoot
      ? execFileSync('runuser', ['-u', 'postgres', '--', join(bin, command), ...args], { stdio: 'pipe' })
      : execFileSync(join(bin, command), args, { stdio: 'pipe' });
  if (asRoot) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString().trim()), -1);
  const data = join(dir, 'data');
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  // Not synchronous: requests of the test keep going while the server stops and starts.
  const ctl = async (...args: string[]) => {
    const ctlArgs = [join(bin, 'pg_ctl'), '-D', data, '-l', join(dir, 'log'), '-w', ...args];
    if (asRoot) await promisify(execFile)('runuser', ['-u', 'postgres', '--', ...ctlArgs]);
    else await promisify(execFile)(ctlArgs[0]!, ctlArgs.slice(1));
  };
  const start = async () => {
    await ctl('-o', options, 'start');
  };
  const stop = async () => {
    await ctl('-m', 'fast', 'stop');
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    async close() {
      await ctl('-m', 'immediate', 'stop').catch(() => {}); // already stopped
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function startPrivateRedis(): Promise<PrivateService> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    for (let i = 0; i < 100; i++) {
      try {
        execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'ignore' });
        return;
      } catch {
        await sleep(50);
      }
    }
    throw new Error(`redis-server did not start on port ${port}`);
  };
  const stop = async () => {
    const dying = child;
    child = undefined;
    if (!dying || dying.exitCode !== null) return;
    const exited = new Promise((resolve) => dying.once('exit', resolve));
    dying.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    stop,
    close: stop,
  };
}
