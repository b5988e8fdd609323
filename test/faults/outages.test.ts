import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPostgres } from '../../src/infra/db.ts';
import { eicarTestFile } from '../../src/infra/scanner/index.ts';
import { backend } from '../support/backends.ts';
import { ADMIN_KEY, expectStatus, type Reply, request } from '../support/coffer.ts';
import { type FakeClamd, startFakeClamd } from '../support/fake-clamd.ts';
import { put } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import {
  type PrivateService,
  privatePostgresUnavailable,
  privateRedisUnavailable,
  startPrivatePostgres,
  startPrivateRedis,
} from '../support/private-services.ts';
import { type CofferProcess, ready, sleep, startProcess, stopAll, until } from '../support/processes.ts';
import { startProxy, type Proxy as TcpProxy } from '../support/proxy.ts';
import { type Endpoint, type Receiver, startReceiver } from '../support/receiver.ts';
import {
  expectEventsDelivered,
  expectNothingLeft,
  expectReadyBytes,
  newProject,
  onDisk,
  type ProjectApi,
} from './invariants.ts';

/**
 * Dependencies that go away under a running `coffer serve` and come back: a PostgreSQL restart under
 * load, Redis down and back, clamd down and back (through a proxy that is cut), and a store folder
 * that is full during a PUT. Coffer fails closed with a clear error, loses nothing it confirmed,
 * and recovers without a restart; after each, the invariants of test/faults hold.
 *
 * The server runs on a PostgreSQL cluster and a Redis of this test's own, so that stopping them
 * touches no other test. One pass is enough: the postgres project where there is one, else the
 * embedded project.
 */
const runsHere = process.env.COFFER_TEST_DATABASE_URL ? backend === 'postgres' : backend === 'embedded';
const missing = privatePostgresUnavailable() ?? privateRedisUnavailable();
if (runsHere && missing) {
  process.stderr.write(`test/faults/outages.test.ts is skipped: ${missing}\n`);
}
const enabled = runsHere && !missing;

const LEASE_SECONDS = 2;
const KiB = 1024;
const MiB = 1024 * KiB;
/** The store folder's size when a tmpfs can be mounted on it (the full-disk scenario). */
const STORE_BYTES = 16 * MiB;

let dataDir: string;
let objects: string;
/** Mounting the store's tmpfs needs root (as in CI); elsewhere the full-disk scenario does not run. */
const asRoot = process.getuid?.() === 0;
let mounted = false;
let mountFailure: string | undefined;
let pg: PrivateService;
let redis: PrivateService;
let clamd: { proxy: TcpProxy; fake?: FakeClamd; real: boolean };
let receiver: Receiver;
/** Read-only look at the server's database, for the queues and the keys of live objects. */
let db: Db;
let coffer: CofferProcess;

beforeAll(async () => {
  if (!enabled) return;
  dataDir = mkdtempSync(join(tmpdir(), 'coffer-outages-'));
  objects = join(dataDir, 'objects');
  mkdirSync(objects);
  if (asRoot) {
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${STORE_BYTES}`, 'coffer-outages', objects], {
        stdio: 'pipe',
      });
      mounted = true;
    } catch (error) {
      mountFailure = String(error).split('\n')[0];
    }
  }
  [pg, redis, receiver] = await Promise.all([startPrivatePostgres(), startPrivateRedis(), startReceiver()]);
  // A real clamd where one is given over TCP (it flags EICAR), else a stand-in that finds every file clean.
  const real = process.env.COFFER_TEST_CLAMD_URL;
  if (real && URL.canParse(real) && new URL(real).protocol === 'tcp:') {
    const { hostname, port } = new URL(real);
    clamd = { proxy: await startProxy(hostname, Number(port)), real: true };
  } else {
    const fake = await startFakeClamd(await freePort(), 'clean');
    clamd = { proxy: await startProxy('127.0.0.1', fake.port), fake, real: false };
  }
  db = await openPostgres(pg.url);
  const caFile = join(dataDir, 'receiver-ca.pem');
  writeFileSync(caFile, receiver.ca);
  const port = await freePort();
  coffer = startProcess('serve', 'serve', {
    PORT: String(port),
    COFFER_PUBLIC_URL: `http://127.0.0.1:${port}`,
    COFFER_DATA_DIR: dataDir,
    COFFER_DATABASE_URL: pg.url,
    COFFER_REDIS_URL: redis.url,
    COFFER_CLAMD_URL: `tcp://127.0.0.1:${clamd.proxy.port}`,
    COFFER_ADMIN_KEY: ADMIN_KEY,
    COFFER_LOG_LEVEL: 'info',
    COFFER_JOB_LEASE_SECONDS: String(LEASE_SECONDS),
    COFFER_GC_GRACE_SECONDS: '1',
    COFFER_GC_INTERVAL_SECONDS: '1',
    COFFER_WEBHOOK_RETRY_SCHEDULE: '0,1,1,1,1',
    COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    NODE_EXTRA_CA_CERTS: caFile,
  });
  await ready(coffer);
}, 120_000);

afterAll(async () => {
  await stopAll();
  await db?.close();
  await Promise.all([
    pg?.close(),
    redis?.close(),
    receiver?.close(),
    clamd?.proxy.close(),
    clamd?.fake?.close(),
  ]);
  if (mounted) execFileSync('umount', ['-l', objects]);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const readiness = async () => {
  const reply = await request(`${coffer.url}/health/ready`, 'GET');
  return reply as Reply<{ status: string; checks: Record<string, string> }>;
};

/** The objects the database still refers to: contents and versions of files not purged. */
async function liveKeys(): Promise<Set<string>> {
  const rows = await db.query<{ storage_key: string }>(
    `SELECT storage_key FROM files WHERE purged_at IS NULL AND status IN ('ready', 'quarantined')
     UNION SELECT v.storage_key FROM file_versions v JOIN files f ON f.id = v.file_id WHERE f.purged_at IS NULL`,
  );
  return new Set(rows.map((row) => row.storage_key));
}

/** No job left in any queue: every file settled, every delivery sent. */
async function expectQueuesEmpty(): Promise<void> {
  await until('the queues to be empty', async () => {
    const [jobs] = await db.query<{ count: number }>('SELECT count(*)::int4 AS count FROM jobs');
    const [pending] = await db.query<{ count: number }>(
      `SELECT count(*)::int4 AS count FROM deliveries WHERE status = 'pending'`,
    );
    return jobs!.count === 0 && pending!.count === 0;
  });
}

/** One upload at a time, each step retried until it is answered (as a client does); every refusal kept. */
async function uploadWithRetries(
  api: ProjectApi,
  bytes: Buffer,
  refusals: Reply[],
  deadline: number,
): Promise<{ fileId: string; confirmed: Reply } | undefined> {
  const attempt = async (call: () => Promise<Reply>, done: (reply: Reply) => boolean) => {
    while (Date.now() < deadline) {
      const reply = await call().catch((error: Error) => ({ status: 0, body: error.message }) as Reply);
      if (done(reply)) return reply;
      refusals.push(reply);
      await sleep(100);
    }
    return undefined;
  };
  const started = await attempt(
    () =>
      api('POST', '/files/upload', {
        filename: 'load.bin',
        content_type: 'application/octet-stream',
        size_bytes: bytes.length,
      }),
    (reply) => reply.status === 201,
  );
  if (!started) return undefined;
  const stored = await put(started.body.upload_url, bytes, 'application/octet-stream');
  expect(stored.status, stored.text).toBe(200);
  const fileId: string = started.body.file_id;
  const confirmed = await attempt(
    () => api('POST', `/files/${fileId}/confirm`),
    // A confirm whose answer was lost after its commit: a retry finds the file moved on.
    (reply) =>
      reply.status === 200 ||
      (reply.status === 409 && ['processing', 'ready'].includes(reply.body.error?.details?.status)),
  );
  return confirmed && { fileId, confirmed };
}

const admin = (method: string, path: string, body?: unknown) =>
  request(`${coffer.url}/v1${path}`, method, { token: ADMIN_KEY, body });

/** Initiate, PUT and confirm, each answered as it must be; returns the file id. */
async function upload(api: ProjectApi, bytes: Buffer, status = 'ready'): Promise<string> {
  const started = await api('POST', '/files/upload', {
    filename: 'file.bin',
    content_type: 'application/octet-stream',
    size_bytes: bytes.length,
  });
  expectStatus(started, 201);
  const stored = await put(started.body.upload_url, bytes, 'application/octet-stream');
  expect(stored.status, stored.text).toBe(200);
  const confirmed = await api('POST', `/files/${started.body.file_id}/confirm`);
  expectStatus(confirmed, 200);
  expect(confirmed.body.status).toBe(status);
  return started.body.file_id;
}

/** [file_id, event] for the webhooks of a file uploaded that reached `status`. */
const settledEvents = (id: string, status: string): [string, string][] => [
  [id, 'file.uploaded'],
  [id, `file.${status}`],
];

/**
 * Every file reaches its status (by default, every file `uploaded` is ready) and its webhooks, with
 * `moreEvents`, are delivered; then the invariants of test/faults hold.
 */
async function expectSettled(
  project: { api: ProjectApi; webhookId: string; endpoint: Endpoint },
  uploaded: Map<string, Buffer>,
  {
    statuses = new Map([...uploaded.keys()].map((id) => [id, 'ready'])),
    moreEvents = [],
  }: { statuses?: Map<string, string>; moreEvents?: [string, string][] } = {},
): Promise<void> {
  const { api, webhookId, endpoint } = project;
  await until('every file to be settled', async () => {
    const files = await expectReadyBytes(api, uploaded);
    return [...statuses].every(([id, status]) => files.get(id)?.status === status);
  });
  const events = [...statuses].flatMap(([id, status]) => settledEvents(id, status));
  await expectEventsDelivered(api, webhookId, endpoint, [...events, ...moreEvents]);
  await expectQueuesEmpty();
  await expectNothingLeft(objects, liveKeys);
}

/** Takes a dependency away while `during` runs, and always brings it back (a failure must not cascade). */
async function without(
  service: { stop(): Promise<void>; start(): Promise<void> },
  during: () => Promise<void>,
): Promise<void> {
  await service.stop();
  try {
    await during();
  } finally {
    await service.start();
  }
}

describe.skipIf(!enabled)('dependencies down and back under a running coffer serve', () => {
  it('PostgreSQL restarted under load: requests fail closed with 503 DATABASE_UNAVAILABLE while it is down, nothing confirmed is lost, and the server recovers by itself', async () => {
    const endpoint = receiver.endpoint();
    const { api, webhookId } = await newProject(() => coffer.url, ADMIN_KEY, endpoint, {
      virus_scan_enabled: true,
    });
    const uploaded = new Map<string, Buffer>();
    const refusals: Reply[] = [];
    let running = true;
    const clients = Array.from({ length: 4 }, async () => {
      while (running) {
        const bytes = randomBytes(4 * KiB + Math.floor(Math.random() * 16 * KiB));
        const done = await uploadWithRetries(api, bytes, refusals, Date.now() + 60_000);
        expect(done, 'an upload to go through once the database is back').toBeDefined();
        uploaded.set(done!.fileId, bytes);
      }
    });
    try {
      await until('uploads to be confirmed', () => uploaded.size >= 8);
      await without(pg, async () => {
        const down = await until('readiness to report the database', async () => {
          const reply = await readiness();
          return reply.status === 503 && reply;
        });
        expect(down.body.checks).toMatchObject({ database: 'unavailable', cache: 'ok', store: 'ok' });
        await until('uploads to be refused', () => refusals.length >= 4);
      });
      await until('readiness to recover', async () => (await readiness()).status === 200);
      const before = uploaded.size;
      await until('uploads to be confirmed again', () => uploaded.size >= before + 8);
    } finally {
      running = false;
      await Promise.all(clients);
    }

    // Refused while it was down, each saying why; never a 500, never a dropped connection.
    expect(new Set(refusals.map((reply) => `${reply.status} ${reply.body?.error?.code}`))).toEqual(
      new Set(['503 DATABASE_UNAVAILABLE']),
    );
    await expectSettled({ api, webhookId, endpoint }, uploaded);
  }, 120_000);

  it('Redis down and back: requests keep working without it, a key revoked meanwhile stays refused, and rate limits count again once it is back', async () => {
    const endpoint = receiver.endpoint();
    const { api, webhookId } = await newProject(() => coffer.url, ADMIN_KEY, endpoint);
    const uploaded = new Map<string, Buffer>();
    const add = async () => {
      const bytes = randomBytes(8 * KiB);
      uploaded.set(await upload(api, bytes), bytes);
    };
    const revoked = await admin('POST', `/projects/${api.projectId}/api-keys`, {
      name: 'revoked during the outage',
      scopes: ['files:read'],
    });
    expectStatus(revoked, 201);
    const asRevoked = () =>
      request(`${coffer.url}/v1/projects/${api.projectId}/files`, 'GET', {
        token: revoked.body.key,
      });
    const listed = await asRevoked(); // now cached in Redis
    expectStatus(listed, 200);
    expect(listed.headers.get('ratelimit-limit')).not.toBeNull();
    await add();

    await without(redis, async () => {
      const down = await until('readiness to report the cache', async () => {
        const reply = await readiness();
        return reply.status === 503 && reply;
      });
      expect(down.body.checks).toMatchObject({ database: 'ok', cache: 'unavailable', store: 'ok' });
      for (let i = 0; i < 3; i++) await add();
      // Served without counting (a cache outage must not stop uploads), not refused.
      const uncounted = await api('GET', '/files');
      expectStatus(uncounted, 200);
      expect(uncounted.headers.get('ratelimit-limit')).toBeNull();
      // The revocation cannot reach the cache: the key is read from the database, and refused.
      expectStatus(await admin('DELETE', `/projects/${api.projectId}/api-keys/${revoked.body.id}`), 204);
      expectStatus(await asRevoked(), 401);
    });
    await until('readiness to recover', async () => (await readiness()).status === 200);
    await until('rate limits to count again', async () => {
      const reply = await api('GET', '/files');
      expectStatus(reply, 200);
      return reply.headers.get('ratelimit-limit') !== null;
    });
    expectStatus(await asRevoked(), 401);
    await add();
    await expectSettled({ api, webhookId, endpoint }, uploaded);
  }, 60_000);

  it('clamd down and back: files wait in processing, none becomes ready without a scan, and all are scanned once it is back', async () => {
    const endpoint = receiver.endpoint();
    const { api, webhookId } = await newProject(() => coffer.url, ADMIN_KEY, endpoint, {
      virus_scan_enabled: true,
    });
    const uploaded = new Map<string, Buffer>();
    const expected = new Map<string, string>();
    await without({ stop: () => clamd.proxy.cut(), start: () => clamd.proxy.restore() }, async () => {
      for (let i = 0; i < 3; i++) {
        const bytes = randomBytes(8 * KiB);
        const id = await upload(api, bytes, 'processing');
        uploaded.set(id, bytes);
        expected.set(id, 'ready');
      }
      // With a real clamd, a file it must flag: scanned for real once it is back.
      if (clamd.real) {
        const infected = await upload(api, eicarTestFile(), 'processing');
        expected.set(infected, 'quarantined');
      }
      // Every scan failed for now and waits for its retry; no file moved on meanwhile.
      await until('every scan to have failed once', async () => {
        for (const id of expected.keys()) {
          expect((await api('GET', `/files/${id}`)).body.status).toBe('processing');
        }
        const jobs = await db.query<{ last_error: string | null }>(
          'SELECT last_error FROM jobs WHERE project_id = $1',
          [api.projectId],
        );
        return jobs.length === expected.size && jobs.every((job) => job.last_error !== null);
      });
    });
    const restoredAt = Date.now();
    await expectSettled({ api, webhookId, endpoint }, uploaded, { statuses: expected });
    // Each verdict came after clamd was back.
    const verdicts = endpoint.requests.filter((r) => r.json?.event !== 'file.uploaded');
    expect(verdicts).toHaveLength(expected.size);
    for (const verdict of verdicts) expect(verdict.at).toBeGreaterThan(restoredAt);
  }, 90_000);

  it.runIf(asRoot)(
    'a full store during a PUT: 507 STORAGE_FULL, no partial bytes kept, and the same URL works once space is freed',
    async () => {
      if (!mounted) throw new Error(`a tmpfs cannot be mounted on the store: ${mountFailure}`);
      const endpoint = receiver.endpoint();
      const { api, webhookId } = await newProject(() => coffer.url, ADMIN_KEY, endpoint);
      const free = () => {
        const stats = statfsSync(objects);
        return stats.bavail * stats.bsize;
      };
      // A file that leaves less room than the next upload needs.
      const filler = randomBytes(Math.max(free() - MiB, 0));
      const fillerId = await upload(api, filler);
      const large = randomBytes(2 * MiB);
      const started = await api('POST', '/files/upload', {
        filename: 'large.bin',
        content_type: 'application/octet-stream',
        size_bytes: large.length,
      });
      expectStatus(started, 201);
      const before = await onDisk(objects);
      const refused = await fetch(started.body.upload_url, {
        method: 'PUT',
        body: large,
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(refused.status).toBe(507);
      const body = (await refused.json()) as { error: { code: string; message: string; request_id: string } };
      expect(body.error).toMatchObject({ code: 'STORAGE_FULL', request_id: expect.any(String) });
      expect(body.error.message).toMatch(/no space left/);
      // Nothing of it was kept: no temp file, no object.
      expect(await onDisk(objects)).toEqual(before);
      expect((await api('GET', `/files/${started.body.file_id}`)).body.status).toBe('uploading');

      // Space freed: the deleted file's bytes are collected after the grace period.
      expectStatus(await api('DELETE', `/files/${fillerId}`), 200);
      await until('the deleted file to be collected', () => free() > large.length + MiB);
      const stored = await put(started.body.upload_url, large, 'application/octet-stream');
      expect(stored.status, stored.text).toBe(200);
      expectStatus(await api('POST', `/files/${started.body.file_id}/confirm`), 200);
      const uploaded = new Map([[started.body.file_id as string, large]]);
      const small = randomBytes(4 * KiB);
      uploaded.set(await upload(api, small), small);
      await expectSettled({ api, webhookId, endpoint }, uploaded, {
        moreEvents: [...settledEvents(fillerId, 'ready'), [fillerId, 'file.deleted']],
      });
    },
    60_000,
  );
});
