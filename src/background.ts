import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Db } from './infra/db.ts';
import { createEmbeddedVacuum } from './infra/embedded-vacuum.ts';
import { createPeriodicRunner, type PeriodicTask } from './infra/jobs/index.ts';
import type { ObjectStore } from './infra/storage/object-store.ts';
import type { AuditService } from './modules/audit/service.ts';
import type { Collector } from './modules/files/collector.ts';
import type { Pipeline } from './modules/pipeline/service.ts';
import type { Thumbnailer } from './modules/renditions/thumbnails.ts';
import type { MultipartService } from './modules/uploads/multipart.ts';
import type { UsageService } from './modules/usage/service.ts';
import type { Dispatcher } from './modules/webhooks/dispatcher.ts';
import { collectEndedTails } from './protocols/tus/tails.ts';
import { jobWorker, type Worker } from './workers.ts';

/**
 * How often the embedded database looks for tables to vacuum (autovacuum's naptime is a minute; a
 * table is still vacuumed at most once a minute). Often, so that a table's first statistics come
 * seconds after its first rows: before them the planner takes it for empty, and the lookup of an S3
 * key scanned all of a project's files (files_size) instead of reading its own index (files_s3_key).
 * A check that finds nothing due costs about 3 ms, with the claim and reschedule of its periodic job
 * (two small updates).
 */
const VACUUM_CHECK_SECONDS = 5;

/** Periodic tasks whose one pass covers every project: a pass never says more work is waiting. */
const onePass =
  (work: () => Promise<unknown>): PeriodicTask['run'] =>
  async () => {
    await work();
    return false;
  };

/**
 * Everything Coffer runs in the background, in one list: what `coffer serve` (beside the API) and
 * `coffer worker` run. Every item is claimed with a lease, so any number of workers share it.
 *
 * Queued jobs, each run by a handler of its module and retried with backoff:
 *   scan      (jobs)        pipeline  virus scan and MIME check of a processing file or new content
 *   digest    (jobs)        pipeline  SHA-256 of bytes the store did not hash on the way in
 *   thumbnail (jobs)        renditions  the project's eager thumbnails of an image that became ready
 *   deliver   (deliveries)  webhooks  one signed delivery attempt of an event to a webhook
 *
 * Periodic tasks, each run once per deployment per interval (at once again while it finds work):
 * the `periodic` list below.
 */
export function backgroundWork(deps: {
  config: Config;
  db: Db;
  store: ObjectStore;
  logger: Logger;
  pipeline: Pipeline;
  thumbnailer: Thumbnailer;
  dispatcher: Dispatcher;
  collector: Collector;
  multipart: MultipartService;
  usage: UsageService;
  audit: AuditService;
}): Worker[] {
  const { config, db, store, logger, pipeline, thumbnailer, dispatcher, collector, multipart, usage, audit } =
    deps;
  const vacuumNext = db.kind === 'pglite' ? createEmbeddedVacuum(db) : undefined;

  const periodic: PeriodicTask[] = [
    // Objects of deleted files and of uploads never finished, after the grace period.
    {
      name: 'collect',
      everySeconds: config.gcIntervalSeconds,
      run: async () => Object.values(await collector.sweep()).some((count) => count > 0),
    },
    // Multipart uploads past their expiry, or left completing by a process that died.
    {
      name: 'reap-multipart',
      everySeconds: config.gcIntervalSeconds,
      run: async () => (await multipart.reap()) > 0,
    },
    // Bytes of tus uploads that waited for a part when their upload was terminated or expired.
    { name: 'tus-tails', everySeconds: config.gcIntervalSeconds, run: () => collectEndedTails(db, store) },
    // The usage deltas every change writes, folded into each project's totals.
    { name: 'fold-usage', everySeconds: config.gcIntervalSeconds, run: onePass(() => usage.fold()) },
    // Audit entries past COFFER_AUDIT_RETENTION_DAYS.
    { name: 'audit-retention', everySeconds: 3600, run: () => audit.prune() },
    // Usage counted afresh from the tables, any drift corrected and counted.
    { name: 'reconcile-usage', everySeconds: 3600, run: onePass(() => usage.reconcile()) },
  ];
  // PostgreSQL's autovacuum does this on a server; the embedded engine has none.
  if (vacuumNext) {
    periodic.push({
      name: 'vacuum',
      everySeconds: VACUUM_CHECK_SECONDS,
      run: async () => {
        const started = performance.now();
        const table = await vacuumNext();
        if (table === undefined) return false;
        const ms = Math.round(performance.now() - started);
        // A slow one held requests meanwhile: worth an operator's eye.
        logger[ms >= 1000 ? 'info' : 'debug']({ table, ms }, 'embedded database table vacuumed');
        return true; // one table per pass: requests run between two
      },
    });
  }

  const tasks = createPeriodicRunner({ db, leaseSeconds: config.jobLeaseSeconds, logger, tasks: periodic });
  return [
    jobWorker('periodic', tasks, 1000),
    jobWorker('pipeline', pipeline.runner, 250),
    jobWorker('thumbnails', thumbnailer, 250),
    jobWorker('webhooks', dispatcher, 200),
  ];
}
