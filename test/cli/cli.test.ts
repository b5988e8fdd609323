import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { quoteIdent } from '../../src/infra/db.ts';
import { loadMigrations } from '../../src/infra/migrations/index.ts';
import { backend, namespace, TEST_SECRET_KEY, testDb } from '../support/backends.ts';
import { freePort } from '../support/net.ts';

const root = join(import.meta.dirname, '../..');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function freshDir(): string {
  return mkdtempSync(join(tmpdir(), 'coffer-cli-'));
}

function cli(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, ['src/main.ts', ...args], {
    cwd: root,
    env: { ...process.env, COFFER_LOG_LEVEL: 'warn', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

/**
 * Starts `coffer serve` on a port the system hands out and resolves once /health/ready answers, with
 * everything it printed so far.
 */
async function serve(env: Record<string, string>) {
  const port = await freePort();
  const child = spawn(process.execPath, ['src/main.ts', 'serve'], {
    cwd: root,
    env: { ...process.env, COFFER_LOG_LEVEL: 'warn', ...env, PORT: String(port) },
  });
  children.push(child);
  let stdout = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 45_000;
  while (Date.now() < deadline) {
    const ready = await fetch(`${url}/health/ready`).catch(() => undefined);
    if (ready?.status === 200) return { child, url, stdout: () => stdout };
    if (child.exitCode !== null) throw new Error(`coffer exited with ${child.exitCode}:\n${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error('coffer did not become ready');
}

const stopped = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

/** The state letter and start time (field 22) of `pid` in /proc/<pid>/stat, on Linux. */
function procStat(pid: number) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0], startTime: fields[19]! };
}

/** Writes the embedded database lock of `dir` as a Coffer process would have left it. */
function writeLock(dir: string, content: string) {
  mkdirSync(join(dir, 'pglite'), { recursive: true });
  writeFileSync(join(dir, 'pglite', 'coffer.lock'), content);
}

const lockHolder = (dir: string) =>
  Number(readFileSync(join(dir, 'pglite', 'coffer.lock'), 'utf8').split(' ')[0]);

describe('the coffer command', () => {
  it('serves on the embedded default, prints a generated admin key once, and stops cleanly on SIGTERM', async () => {
    const dir = freshDir();
    const env = { COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: '' };
    const first = await serve(env);
    const key = /coffer_admin_[A-Za-z0-9_-]{43}/.exec(first.stdout())?.[0];
    expect(key).toBeDefined();
    const orgs = await fetch(`${first.url}/v1/organizations`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(orgs.status).toBe(200);
    const exit = stopped(first.child);
    first.child.kill('SIGTERM');
    expect(await exit).toBe(0);

    const second = await serve(env);
    expect(second.stdout()).not.toContain('coffer_admin_');
    const again = await fetch(`${second.url}/v1/organizations`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(again.status).toBe(200);
    second.child.kill('SIGINT');
    expect(await stopped(second.child)).toBe(0);
  });

  it('prints the generated admin key when coffer worker is the first to start', async () => {
    const dir = freshDir();
    const worker = spawn(process.execPath, ['src/main.ts', 'worker'], {
      cwd: root,
      env: { ...process.env, COFFER_LOG_LEVEL: 'warn', COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: '' },
    });
    children.push(worker);
    const exit = stopped(worker);
    let stdout = '';
    const key = await new Promise<string | undefined>((resolve) => {
      worker.stdout.on('data', (chunk) => {
        stdout += chunk;
        const found = /coffer_admin_[A-Za-z0-9_-]{43}/.exec(stdout)?.[0];
        if (found) resolve(found);
      });
      void exit.then(() => resolve(undefined));
      setTimeout(() => resolve(undefined), 30_000).unref();
    });
    expect(key).toBeDefined();
    worker.kill('SIGTERM');
    expect(await exit).toBe(0);

    const server = await serve({ COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: '' });
    expect(server.stdout()).not.toContain('coffer_admin_');
    const orgs = await fetch(`${server.url}/v1/organizations`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(orgs.status).toBe(200);
  });

  it('bootstraps an organization, a project and a key with every scope', async () => {
    const dir = freshDir();
    const adminKey = `coffer_admin_${'b'.repeat(43)}`;
    const result = cli(['admin', 'bootstrap', '--project', 'Site'], {
      COFFER_DATA_DIR: dir,
      COFFER_ADMIN_KEY: adminKey,
    });
    expect(result.status).toBe(0);
    const projectId = /project_id:\s+(proj_\w+)/.exec(result.stdout)?.[1];
    const apiKey = /api_key:\s+(coffer_live_[\w-]+)/.exec(result.stdout)?.[1];
    expect(projectId).toBeDefined();
    expect(apiKey).toBeDefined();

    const server = await serve({ COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: adminKey });
    const project = await fetch(`${server.url}/v1/projects/${projectId}`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(project.status).toBe(200);
    expect(((await project.json()) as { name: string }).name).toBe('Site');
    const upload = await fetch(`${server.url}/v1/projects/${projectId}/files/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ filename: 'a.txt', content_type: 'text/plain', size_bytes: 1 }),
    });
    expect(upload.status).toBe(201);
  });

  it('refuses a second process on the embedded database, and takes over a stale lock', async () => {
    const dir = freshDir();
    const adminKey = `coffer_admin_${'d'.repeat(43)}`;
    const server = await serve({ COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: adminKey });
    const second = cli(['admin', 'bootstrap'], { COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: adminKey });
    expect(second.status).toBe(1);
    expect(second.stderr).toContain(`in use by another Coffer process (pid ${server.child.pid})`);
    const orgs = await fetch(`${server.url}/v1/organizations`, {
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(orgs.status).toBe(200);
    server.child.kill('SIGKILL'); // no clean-up: the lock stays behind
    await stopped(server.child);
    expect(existsSync(join(dir, 'pglite', 'coffer.lock'))).toBe(true);
    const after = cli(['admin', 'bootstrap'], { COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: adminKey });
    expect(after.status).toBe(0);
    expect(existsSync(join(dir, 'pglite', 'coffer.lock'))).toBe(false);
  });

  it('gives the embedded database to exactly one of two processes started at the same moment', async () => {
    const dir = freshDir();
    const env = { COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: `coffer_admin_${'e'.repeat(43)}` };
    const outcomes = await Promise.all(
      [1, 2].map(() =>
        serve(env).then(
          (server) => ({ pid: server.child.pid }),
          () => undefined,
        ),
      ),
    );
    const started = outcomes.filter((outcome) => outcome !== undefined);
    expect(started).toHaveLength(1);
    expect(lockHolder(dir)).toBe(started[0]!.pid);
  });

  it.runIf(process.platform === 'linux')(
    'takes over a lock whose holder was killed but not yet reaped (a zombie)',
    async () => {
      // sh forks a child that exits only after sh has become `sleep 30`, which never reaps it (a
      // child exiting at once could be reaped by sh itself first).
      const parent = spawn('sh', ['-c', 'sleep 0.3 & echo $!; exec sleep 30']);
      children.push(parent);
      const zombie = Number(
        await new Promise<string>((resolve) => parent.stdout.once('data', (chunk) => resolve(String(chunk)))),
      );
      const deadline = Date.now() + 5000;
      while (procStat(zombie).state !== 'Z') {
        if (Date.now() > deadline) throw new Error(`pid ${zombie} did not become a zombie`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const dir = freshDir();
      writeLock(dir, String(zombie)); // a signal still reaches a zombie: only its state tells it is dead
      const server = await serve({ COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: '' });
      expect(lockHolder(dir)).toBe(server.child.pid);
    },
  );

  it.runIf(process.platform === 'linux')(
    'takes over a lock whose pid now belongs to another process (a different start time)',
    async () => {
      const other = spawn('sleep', ['30']);
      children.push(other);
      const pid = other.pid!;
      const { startTime } = procStat(pid);
      const dir = freshDir();
      writeLock(dir, `${pid} ${startTime}`); // the process that took the lock: refused
      const refused = cli(['migrate'], { COFFER_DATA_DIR: dir });
      expect(refused.status).toBe(1);
      expect(refused.stderr).toContain(`in use by another Coffer process (pid ${pid})`);
      writeLock(dir, `${pid} ${Number(startTime) - 1}`); // an earlier process with the same pid
      const server = await serve({ COFFER_DATA_DIR: dir, COFFER_ADMIN_KEY: '' });
      expect(lockHolder(dir)).toBe(server.child.pid);
      expect(procStat(pid).state).not.toBe('Z'); // the other process still runs
    },
  );

  it.runIf(process.platform === 'linux')(
    "serves from the process it was started as, with glibc's malloc thresholds and V8's young generation set, an operator's own value kept",
    async () => {
      const server = await serve({
        COFFER_DATA_DIR: freshDir(),
        COFFER_ADMIN_KEY: '',
        MALLOC_MMAP_THRESHOLD_: '65536',
      });
      const pid = server.child.pid!;
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      expect(environ).toContain(`MALLOC_TRIM_THRESHOLD_=${1024 * 1024}`);
      expect(environ).toContain('MALLOC_MMAP_THRESHOLD_=65536');
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toContain('--max-semi-space-size=8');
    },
  );

  it('finds a new embedded database migrated already (a copy of the template npm test builds first)', () => {
    const dir = freshDir();
    const first = cli(['migrate'], { COFFER_DATA_DIR: dir });
    expect(first.status).toBe(0);
    expect(first.stdout.trim()).toBe('Database is up to date.');
  });

  it('answers unknown commands with the usage and exit code 64', () => {
    const result = cli(['frobnicate'], {});
    expect(result.status).toBe(64);
    expect(result.stderr).toContain('Usage: coffer');
  });
});

/** An empty schema of the test PostgreSQL, and a database URL whose search path starts with it. */
async function emptySchema(name: string): Promise<{ schema: string; url: string }> {
  const schema = `${namespace()}_${name}`;
  const db = await testDb();
  await db.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`);
  await db.query(`CREATE SCHEMA ${quoteIdent(schema)}`);
  const url = new URL(process.env.COFFER_TEST_DATABASE_URL!);
  url.searchParams.set('options', `-c search_path=${schema},public`);
  return { schema, url: url.toString() };
}

describe.runIf(backend === 'postgres')('on PostgreSQL', () => {
  it('migrates an empty database and reports when it is up to date', async () => {
    const { schema, url } = await emptySchema('migrate');
    const db = await testDb();
    const env = { COFFER_DATA_DIR: freshDir(), COFFER_DATABASE_URL: url };
    try {
      const first = cli(['migrate'], env);
      expect(first.status).toBe(0);
      expect(first.stdout).toMatch(/^Applied: 001_core\.sql/);
      expect(cli(['migrate'], env).stdout.trim()).toBe('Database is up to date.');
    } finally {
      await db.query(`DROP SCHEMA ${quoteIdent(schema)} CASCADE`);
    }
  });

  it('lets two servers start at once against one database (migrations under an advisory lock)', async () => {
    const { schema, url } = await emptySchema('cli');
    const db = await testDb();
    const env = () => ({
      COFFER_DATA_DIR: freshDir(),
      COFFER_DATABASE_URL: url,
      COFFER_REDIS_URL: process.env.COFFER_TEST_REDIS_URL ?? '',
      COFFER_ADMIN_KEY: `coffer_admin_${'c'.repeat(43)}`,
      COFFER_SECRET_KEY: TEST_SECRET_KEY,
    });
    const [a, b] = await Promise.all([serve(env()), serve(env())]);
    expect((await fetch(`${a.url}/health/ready`)).status).toBe(200);
    expect((await fetch(`${b.url}/health/ready`)).status).toBe(200);
    const applied = await db.query<{ count: number }>(
      `SELECT count(*)::int8 AS count FROM ${quoteIdent(schema)}.schema_migrations`,
    );
    expect(applied[0]!.count).toBe(loadMigrations().length);
    await db.query(`DROP SCHEMA ${quoteIdent(schema)} CASCADE`);
  });
});
