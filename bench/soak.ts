/**
 * Soak: mixed traffic against one Coffer for a long time, reporting per interval what leaks show up in
 * first: the server's resident memory, its open file descriptors, its database connections and the p99
 * latency of each kind of request. Healthy means flat: the last interval against the first one after
 * warm-up.
 *
 * Traffic (COFFER_BENCH_SOAK_CONCURRENCY lanes, default 8), each lane picking at random:
 *   40% upload (initiate + PUT 1–64 KiB + confirm), 25% list (first page, or a search),
 *   20% download (download URL + GET, length checked), 15% delete of a file it uploaded.
 * Once the project holds COFFER_BENCH_SOAK_FILES live files (default 2,000; each interval reports the
 * count) a lane deletes where it would upload, so the working set stays near that size and what
 * grows over the run is history: events, deliveries, deleted and collected files, audit entries. A
 * search with its exact total costs more as the files it matches grow in number (see `list`); that is
 * the data growing, not the service wearing out, which is what a soak looks for.
 * A webhook subscribed to file.ready and file.deleted posts to a local HTTPS receiver that checks every
 * signature; at the end every event must have arrived exactly once.
 *
 * Environment: COFFER_BENCH_SOAK_SECONDS (default 600), COFFER_BENCH_SOAK_INTERVAL_SECONDS (60),
 * COFFER_BENCH_SOAK_CONCURRENCY (8), COFFER_BENCH_SOAK_FILES (2000). The server is a Coffer of its own (webhooks to the loopback
 * receiver allowed, its certificate trusted), with the run's database.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { agent, call, createProject, expectStatus, type Project } from './client.ts';
import { type CofferServer, startCoffer } from './coffer-server.ts';
import { databaseFor } from './database.ts';
import { startWebhookReceiver } from './helper-servers.ts';
import { ADMIN_KEY, type Bench, envInteger, KiB, MiB, progress } from './lib.ts';
import { fmt, percentile } from './measure.ts';
import type { Row } from './report.ts';
import { confirm, initiate, put } from './upload-flow.ts';

const OPERATIONS = ['upload', 'list', 'download', 'delete'] as const;
type Operation = (typeof OPERATIONS)[number];
const WEIGHTS: Record<Operation, number> = { upload: 40, list: 25, download: 20, delete: 15 };
const WEBHOOK_PATH = '/soak';

/** Flat: what the last interval may differ from the first one after warm-up. */
const RSS_GROWTH_LIMIT = 64 * MiB;
const FD_GROWTH_LIMIT = 16;
const P99_GROWTH_LIMIT = 2;

interface Sample {
  minute: number;
  rss: number;
  fds: number;
  /** TCP connections of the server to its PostgreSQL; undefined for the embedded database. */
  dbConnections: number | undefined;
  requests: number;
  errors: number;
  /** Live files of the project at the end of the interval (its working set, see the header). */
  live: number;
  p99: Record<Operation, number>;
}

/** An operation at random by WEIGHTS; at the working set's size, a delete in place of an upload. */
function pick(live: number, workingSet: number): Operation {
  let roll = randomInt(100);
  for (const operation of OPERATIONS) {
    roll -= WEIGHTS[operation];
    if (roll < 0) return operation === 'upload' && live >= workingSet ? 'delete' : operation;
  }
  return 'upload';
}

function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/**
 * The server's established TCP connections to `port` (its database): its socket inodes matched
 * against the kernel's TCP tables.
 */
function connectionsTo(pid: number, port: number): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  let count = 0;
  for (const table of ['tcp', 'tcp6']) {
    const lines = readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1);
    for (const line of lines) {
      const fields = line.trim().split(/\s+/);
      // remote address is field 2 (addr:port), state field 3 (01 = established), inode field 9
      if (
        fields.length > 9 &&
        fields[2]!.endsWith(`:${hexPort}`) &&
        fields[3] === '01' &&
        inodes.has(fields[9]!)
      )
        count++;
    }
  }
  return count;
}

export const soak: Bench = {
  name: 'soak',
  description: 'mixed traffic for COFFER_BENCH_SOAK_SECONDS (10 min): memory, fds, db connections, p99 flat',
  async run(context) {
    const seconds = envInteger('COFFER_BENCH_SOAK_SECONDS', 600);
    const interval = envInteger('COFFER_BENCH_SOAK_INTERVAL_SECONDS', 60);
    const concurrency = envInteger('COFFER_BENCH_SOAK_CONCURRENCY', 8);
    const workingSet = envInteger('COFFER_BENCH_SOAK_FILES', 2000);
    const dir = join(context.scratch, 'soak');
    const receiver = await startWebhookReceiver(join(dir, 'receiver'));
    const env = { COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
    const dataDir = join(dir, 'data');
    let server: CofferServer | undefined;
    try {
      server = await startCoffer(dataDir, 'child', { env, caFile: receiver.caFile });
      const dbUrl = await databaseFor(dataDir);
      const project = await createProject(server);
      const hook = await call('POST', `${server.url}/v1/projects/${project.id}/webhooks`, {
        token: ADMIN_KEY,
        body: { url: `${receiver.origin}${WEBHOOK_PATH}`, events: ['file.ready', 'file.deleted'] },
      });
      expectStatus(hook, 201, 'create webhook');
      receiver.setSecret(WEBHOOK_PATH, hook.body.signing_secret);

      const dbPort = dbUrl === undefined ? undefined : Number(new URL(dbUrl).port || 5432);
      const traffic = await runTraffic(server, project, {
        seconds,
        interval,
        concurrency,
        workingSet,
        dbPort,
      });
      progress(`soak: waiting for ${traffic.events} webhook deliveries`);
      const delivered = await waitForDeliveries(receiver, traffic.events);
      return [
        {
          title: `Soak: ${seconds} s of mixed traffic, ${concurrency} in flight, about ${workingSet} live files`,
          ...report(traffic, delivered),
        },
      ];
    } finally {
      await server?.close();
      await receiver.close();
    }
  },
};

interface Traffic {
  samples: Sample[];
  events: number;
  totals: Record<Operation, number>;
}

async function runTraffic(
  server: CofferServer,
  project: Project,
  options: {
    seconds: number;
    interval: number;
    concurrency: number;
    workingSet: number;
    dbPort: number | undefined;
  },
): Promise<Traffic> {
  const { dbPort } = options;
  const live: string[] = [];
  const totals: Record<Operation, number> = { upload: 0, list: 0, download: 0, delete: 0 };
  let events = 0;
  let latencies: Record<Operation, number[]> = { upload: [], list: [], download: [], delete: [] };
  let errors = 0;
  const samples: Sample[] = [];
  const end = Date.now() + options.seconds * 1000;

  const operations: Record<Operation, () => Promise<void>> = {
    async upload() {
      const size = randomInt(KiB, 64 * KiB);
      const started = await initiate(project, `soak-${randomInt(1e9)}.bin`, size);
      await put(started.upload_url, size, randomBytes(size));
      const file = await confirm(project, started.file_id);
      if (file.status === 'ready') events++;
      live.push(started.file_id);
    },
    async list() {
      const query = randomInt(2) === 0 ? '?limit=20' : `?limit=20&q=soak-${randomInt(10)}`;
      expectStatus(await project.api('GET', `/files${query}`), 200, 'list');
    },
    async download() {
      if (live.length === 0) return;
      const id = live[randomInt(live.length)]!;
      const reply = await project.api<{ url: string }>('GET', `/files/${id}/download`);
      if (reply.status === 404) return; // deleted by another lane meanwhile
      expectStatus(reply, 200, 'download URL');
      const response = await request(reply.body.url, { dispatcher: agent });
      await response.body.dump();
      if (response.statusCode !== 200) throw new Error(`GET download: ${response.statusCode}`);
    },
    async delete() {
      if (live.length === 0) return;
      const id = live.splice(randomInt(live.length), 1)[0]!;
      const reply = await project.api('DELETE', `/files/${id}`);
      expectStatus(reply, 200, 'delete');
      events++;
    },
  };

  const lane = async () => {
    while (Date.now() < end) {
      const operation = pick(live.length, options.workingSet);
      const start = performance.now();
      try {
        await operations[operation]();
        latencies[operation].push(performance.now() - start);
        totals[operation]++;
      } catch (error) {
        errors++;
        if (errors <= 5) progress(`soak: ${operation} failed: ${(error as Error).message}`);
      }
    }
  };

  const sampler = (async () => {
    for (let minute = 1; Date.now() < end; minute++) {
      await sleep(Math.min(options.interval * 1000, Math.max(0, end - Date.now())));
      const p99 = Object.fromEntries(
        OPERATIONS.map((operation) => [operation, percentile(latencies[operation], 99)]),
      ) as Record<Operation, number>;
      const requests = OPERATIONS.reduce((sum, operation) => sum + latencies[operation].length, 0);
      samples.push({
        minute,
        rss: server.rss(),
        fds: openFds(server.pid),
        dbConnections: dbPort === undefined ? undefined : connectionsTo(server.pid, dbPort),
        requests,
        errors,
        live: live.length,
        p99,
      });
      progress(`soak: interval ${minute}: ${requests} operations, RSS ${fmt.mib(server.rss())}`);
      latencies = { upload: [], list: [], download: [], delete: [] };
      errors = 0;
    }
  })();

  await Promise.all([...Array.from({ length: options.concurrency }, lane), sampler]);
  return { samples, events, totals };
}

async function waitForDeliveries(
  receiver: Awaited<ReturnType<typeof startWebhookReceiver>>,
  expected: number,
): Promise<{ count: number; duplicates: number; mismatches: number }> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const stats = await receiver.stats();
    if (stats.count >= expected || Date.now() > deadline) return stats;
    await sleep(200);
  }
}

function report(
  traffic: Traffic,
  delivered: { count: number; duplicates: number; mismatches: number },
): { rows: Row[]; notes: string[] } {
  const { samples } = traffic;
  const first = samples[Math.min(1, samples.length - 1)];
  const last = samples.at(-1);
  const notes = samples.map(
    (s) =>
      `interval ${s.minute}: RSS ${fmt.mib(s.rss)}, ${s.fds} fds, ${s.dbConnections ?? 'embedded'} db connections, ` +
      `${s.requests} operations, ${s.errors} errors, ${s.live} live files; p99 ${OPERATIONS.map((o) => `${o} ${fmt.ms(s.p99[o])}`).join(', ')}`,
  );
  notes.push(
    `operations: ${OPERATIONS.map((o) => `${traffic.totals[o]} ${o}`).join(', ')}; flat = the last interval against ` +
      'the first after warm-up (the second).',
  );
  if (!first || !last) return { rows: [], notes };
  const p99Growth = Math.max(
    ...OPERATIONS.map((o) => (first.p99[o] > 0 ? last.p99[o] / first.p99[o] : 1)).filter(Number.isFinite),
  );
  const errors = samples.reduce((sum, s) => sum + s.errors, 0);
  const rows: Row[] = [
    {
      benchmark: 'server RSS',
      coffer: fmt.mib(last.rss),
      baseline: fmt.mib(first.rss),
      target: `+ < ${fmt.mib(RSS_GROWTH_LIMIT)}`,
      met: last.rss - first.rss < RSS_GROWTH_LIMIT,
    },
    {
      benchmark: 'open file descriptors',
      coffer: String(last.fds),
      baseline: String(first.fds),
      target: `+ ≤ ${FD_GROWTH_LIMIT}`,
      met: last.fds - first.fds <= FD_GROWTH_LIMIT,
    },
    {
      benchmark: 'database connections',
      coffer: String(last.dbConnections ?? 'embedded'),
      baseline: String(first.dbConnections ?? 'embedded'),
      target: 'no growth',
      met: (last.dbConnections ?? 0) <= Math.max(first.dbConnections ?? 0, 20),
    },
    {
      benchmark: 'p99 latency (worst operation)',
      coffer: `${p99Growth.toFixed(2)}×`,
      baseline: 'second interval',
      target: `≤ ${P99_GROWTH_LIMIT}×`,
      met: p99Growth <= P99_GROWTH_LIMIT,
    },
    { benchmark: 'failed operations', coffer: String(errors), target: '0', met: errors === 0 },
    {
      benchmark: 'webhook events delivered once, signed',
      coffer: `${delivered.count} (${delivered.duplicates} dup, ${delivered.mismatches} bad sig)`,
      baseline: `${traffic.events} events`,
      target: 'all, exactly once',
      met: delivered.count === traffic.events && delivered.duplicates === 0 && delivered.mismatches === 0,
    },
  ];
  return { rows, notes };
}
