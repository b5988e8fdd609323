import { Gauge, type Registry } from 'prom-client';
import type { Cache } from '../../infra/cache.ts';
import type { Db, PoolStats } from '../../infra/db.ts';
import { JOBS, type JobKind, type QueueDepth, queueDepth } from '../../infra/jobs/index.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { findAllUsage } from '../usage/repo.ts';
import { PENDING_DELIVERIES } from '../webhooks/delivery-repo.ts';
import { checkReadiness } from './readiness.ts';

/** The database is read at most this often by one process, however many scrapers ask. */
const MAX_AGE_MS = 5_000;
/** A scrape waits no longer for a read; the read goes on and serves the next scrape. */
const LOAD_WAIT_MS = 2_000;

/** The buckets of the kept project usage: a file's status, or `deleted` until it is collected. */
const FILE_BUCKETS = ['uploading', 'processing', 'ready', 'failed', 'quarantined', 'deleted'] as const;
const JOB_KINDS: JobKind[] = ['scan', 'digest', 'thumbnail'];

interface Backlog {
  depth: number;
  oldest_seconds: number;
}

interface QueueState {
  jobs: (Backlog & { kind: string })[];
  deliveries: Backlog;
}

/**
 * The latest result of `load`, loaded again once older than `maxAgeMs`: one load at a time, and a
 * caller waits for it at most LOAD_WAIT_MS. A failed load leaves no value (its series disappear).
 */
function latest<T>(maxAgeMs: number, load: () => Promise<T>): () => Promise<T | undefined> {
  let value: T | undefined;
  let loadedAt = Number.NEGATIVE_INFINITY;
  let loading: Promise<void> | undefined;
  return async () => {
    if (!loading && performance.now() - loadedAt >= maxAgeMs) {
      loading = load()
        .then(
          (loaded) => {
            value = loaded;
            loadedAt = performance.now();
          },
          () => {
            value = undefined;
          },
        )
        .finally(() => {
          loading = undefined;
        });
    }
    if (loading) {
      let timer: NodeJS.Timeout | undefined;
      const wait = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, LOAD_WAIT_MS);
      });
      await Promise.race([loading, wait]).finally(() => clearTimeout(timer));
    }
    return value;
  };
}

/** The numbers the database keeps per project in every change (no count over the files). */
const projectUsage = (db: Db) => findAllUsage(db);

/** Every row of a kind that is not finished: due, running or waiting for its time; age since it was queued. */
const backlog = (depth: QueueDepth): Backlog => ({
  depth: depth.due + depth.running + depth.scheduled,
  oldest_seconds: depth.oldest_seconds ?? 0,
});

async function queueState(db: Db): Promise<QueueState> {
  const [jobs, [deliveries]] = await Promise.all([queueDepth(db, JOBS), queueDepth(db, PENDING_DELIVERIES)]);
  return {
    jobs: jobs.map((depth) => ({ kind: depth.kind, ...backlog(depth) })),
    deliveries: deliveries ? backlog(deliveries) : { depth: 0, oldest_seconds: 0 },
  };
}

/**
 * The gauges read when Prometheus scrapes (nothing is computed between scrapes): readiness of the
 * dependencies, the database pool, files by status per project (one row per project: projects are
 * created by the admin, so their number stays small), and the depth and age of the scan and webhook
 * queues.
 */
export function registerStateGauges(registry: Registry, deps: { db: Db; cache: Cache; store: ObjectStore }) {
  const { db, cache, store } = deps;
  const registers = [registry];

  new Gauge({
    name: 'coffer_ready',
    help: 'Whether each dependency answers (1) or not (0), as GET /health/ready checks it',
    labelNames: ['check'] as const,
    registers,
    async collect() {
      const checks = await checkReadiness(db, cache, store);
      for (const [check, state] of Object.entries(checks)) this.set({ check }, state === 'ok' ? 1 : 0);
    },
  });

  // Only what the database can tell: the embedded one has a single connection and no pool.
  const poolGauges: [string, string, (stats: PoolStats) => number | undefined][] = [
    ['coffer_db_pool_max_connections', 'Connections the database pool may open', (stats) => stats.max],
    ['coffer_db_pool_open_connections', 'Connections the database pool holds open', (stats) => stats.open],
    ['coffer_db_pool_idle_connections', 'Open connections not in use', (stats) => stats.idle],
    ['coffer_db_pool_waiting_queries', 'Queries waiting for a free connection', (stats) => stats.waiting],
  ];
  for (const [name, help, read] of poolGauges) {
    if (read(db.poolStats()) === undefined) continue;
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read(db.poolStats()) ?? 0);
      },
    });
  }

  const usage = latest(MAX_AGE_MS, () => projectUsage(db));
  const usageGauge = (name: string, help: string, unit: 'files' | 'bytes') =>
    new Gauge({
      name,
      help,
      labelNames: ['project_id', 'status'] as const,
      registers,
      async collect() {
        const rows = await usage();
        this.reset();
        for (const row of rows ?? []) {
          for (const status of FILE_BUCKETS) {
            this.set({ project_id: row.project_id, status }, row[`${status}_${unit}`]);
          }
        }
      },
    });
  usageGauge(
    'coffer_files',
    'Files by project and status (deleted: deleted, not yet collected), as the project usage keeps them',
    'files',
  );
  usageGauge('coffer_file_bytes', 'Bytes of the files of coffer_files, by project and status', 'bytes');

  const queues = latest(MAX_AGE_MS, () => queueState(db));
  const queueGauge = (
    name: string,
    help: string,
    labelNames: string[],
    set: (gauge: Gauge, state: QueueState) => void,
  ) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        const state = await queues();
        this.reset();
        if (state) set(this, state);
        else if (labelNames.length === 0) this.remove(); // no series rather than a false 0
      },
    });
  const byKind = (read: (job: QueueState['jobs'][number]) => number) => (gauge: Gauge, state: QueueState) => {
    for (const kind of JOB_KINDS) gauge.set({ kind }, 0);
    for (const job of state.jobs) gauge.set({ kind: job.kind }, read(job));
  };
  queueGauge(
    'coffer_job_queue_depth',
    'Background jobs not finished, by kind (scan: virus scan and type check; digest: checksum)',
    ['kind'],
    byKind((job) => job.depth),
  );
  queueGauge(
    'coffer_job_queue_oldest_age_seconds',
    'Age of the oldest unfinished job of each kind (0 when none)',
    ['kind'],
    byKind((job) => job.oldest_seconds),
  );
  queueGauge(
    'coffer_webhook_queue_depth',
    'Webhook deliveries pending (due or waiting for a retry)',
    [],
    (gauge, state) => gauge.set(state.deliveries.depth),
  );
  queueGauge(
    'coffer_webhook_queue_oldest_age_seconds',
    'Age of the oldest pending webhook delivery, since its event (0 when none)',
    [],
    (gauge, state) => gauge.set(state.deliveries.oldest_seconds),
  );
}
