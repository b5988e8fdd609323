import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Credentials } from './http/auth.ts';
import { type Cache, noCache } from './infra/cache.ts';
import type { Db } from './infra/db.ts';
import { createEmbeddedVacuum } from './infra/embedded-vacuum.ts';
import { createPeriodicRunner } from './infra/jobs/index.ts';
import { createMetrics } from './infra/metrics.ts';
import type { Scanner } from './infra/scanner/index.ts';
import type { ObjectStore } from './infra/storage/object-store.ts';
import { createAuditService } from './modules/audit/service.ts';
import { createCollector } from './modules/files/collector.ts';
import { createFileService } from './modules/files/service.ts';
import { createFolderService } from './modules/folders/service.ts';
import { registerStateGauges } from './modules/health/gauges.ts';
import { createMetadataSchemaService } from './modules/metadata-schema/service.ts';
import { createPipeline } from './modules/pipeline/service.ts';
import { createProjectService } from './modules/projects/service.ts';
import { createMultipartService } from './modules/uploads/multipart.ts';
import { createUploadService } from './modules/uploads/service.ts';
import { createUploadTokenService } from './modules/uploads/tokens.ts';
import { createUsageService } from './modules/usage/service.ts';
import { createVersionService } from './modules/versions/service.ts';
import { createDispatcher } from './modules/webhooks/dispatcher.ts';
import { createWebhookService } from './modules/webhooks/service.ts';
import { jobWorker, type Worker } from './workers.ts';

export interface Infra {
  config: Config;
  db: Db;
  cache: Cache;
  store: ObjectStore;
  scanner: Scanner;
  /** Extra CA certificates (PEM) trusted for webhook receivers, beside NODE_EXTRA_CA_CERTS. */
  webhookCa?: string;
  logger: Logger;
  adminKeyHash: string;
}

/** How often the embedded database looks for tables to vacuum (autovacuum's naptime). */
const VACUUM_CHECK_SECONDS = 60;

/** The composition root: every service, wired to the infrastructure it was given. */
export function createServices(infra: Infra) {
  const { config, db, cache, store } = infra;
  // Only with COFFER_METRICS_PORT set: otherwise nothing is counted, at no cost on any path.
  const metrics = config.metrics ? createMetrics() : undefined;
  if (metrics) registerStateGauges(metrics.registry, { db, cache, store });
  // Key and project lookups may be cached only where a revocation or a settings change reaches
  // every server at once: in a shared cache, or in process memory on the embedded database
  // (one process only). Several servers on one PostgreSQL without Redis read them afresh.
  const lookups = cache.shared || db.kind === 'pglite' ? cache : noCache();
  const projects = createProjectService(db, lookups);
  const audit = createAuditService({ db, retentionDays: config.auditRetentionDays, logger: infra.logger });
  const folders = createFolderService(db);
  const schemas = createMetadataSchemaService(db);
  const files = createFileService({ db, store, folders, schemas });
  const uploads = createUploadService({ config, db, store, folders, schemas, metrics });
  const tokens = createUploadTokenService({ db, folders });
  const multipart = createMultipartService({
    config,
    db,
    store,
    uploads,
    projects,
    logger: infra.logger,
    metrics,
  });
  const versions = createVersionService({ config, db, store });
  const usage = createUsageService({ db, logger: infra.logger, metrics });
  const webhooks = createWebhookService({ db, allowPrivateNetworks: config.webhookAllowPrivateNetworks });
  const dispatcher = createDispatcher({
    db,
    logger: infra.logger,
    metrics,
    options: {
      retrySchedule: config.webhookRetrySchedule,
      timeoutMs: config.webhookTimeoutMs,
      allowPrivateNetworks: config.webhookAllowPrivateNetworks,
      ca: infra.webhookCa,
      leaseSeconds: config.jobLeaseSeconds,
    },
  });
  const pipeline = createPipeline({
    db,
    store,
    scanner: infra.scanner,
    projects,
    logger: infra.logger,
    metrics,
    options: { leaseSeconds: config.jobLeaseSeconds, retryWindowSeconds: config.scanRetryWindowSeconds },
  });
  const credentials: Credentials = {
    adminKeyHash: infra.adminKeyHash,
    projects,
    resolveUploadToken: (secret) => tokens.resolve(secret),
  };
  const collector = createCollector({
    db,
    store,
    graceSeconds: config.gcGraceSeconds,
    uploadUrlTtlSeconds: config.uploadUrlTtlSeconds,
    logger: infra.logger,
    metrics,
  });
  /** The background work `coffer serve` and `coffer worker` run. */
  const workers = (): Worker[] => {
    const vacuumNext = db.kind === 'pglite' ? createEmbeddedVacuum(db) : undefined;
    // Each runs on one worker of the deployment at a time, every interval (sooner while it finds work).
    const periodic = createPeriodicRunner({
      db,
      leaseSeconds: config.jobLeaseSeconds,
      logger: infra.logger,
      tasks: [
        {
          name: 'collect',
          everySeconds: config.gcIntervalSeconds,
          run: async () => Object.values(await collector.sweep()).some((count) => count > 0),
        },
        {
          name: 'reap-multipart',
          everySeconds: config.gcIntervalSeconds,
          run: async () => (await multipart.reap()) > 0,
        },
        {
          name: 'fold-usage',
          everySeconds: config.gcIntervalSeconds,
          run: async () => {
            await usage.fold();
            return false; // one pass folds every project
          },
        },
        { name: 'audit-retention', everySeconds: 3600, run: () => audit.prune() },
        // PostgreSQL's autovacuum does this on a server; the embedded engine has none.
        ...(vacuumNext
          ? [
              {
                name: 'vacuum',
                everySeconds: VACUUM_CHECK_SECONDS,
                run: async () => {
                  const started = performance.now();
                  const table = await vacuumNext();
                  if (table === undefined) return false;
                  const ms = Math.round(performance.now() - started);
                  // A slow one held requests meanwhile: worth an operator's eye.
                  infra.logger[ms >= 1000 ? 'info' : 'debug'](
                    { table, ms },
                    'embedded database table vacuumed',
                  );
                  return true; // one table per pass: requests run between two
                },
              },
            ]
          : []),
        {
          name: 'reconcile-usage',
          everySeconds: 3600,
          run: async () => {
            await usage.reconcile();
            return false; // one pass corrects every project
          },
        },
      ],
    });
    return [
      jobWorker('periodic', periodic, 1000),
      jobWorker('pipeline', pipeline.runner, 250),
      jobWorker('webhooks', dispatcher, 200),
    ];
  };
  return {
    ...infra,
    projects,
    folders,
    schemas,
    files,
    uploads,
    tokens,
    multipart,
    pipeline,
    versions,
    usage,
    webhooks,
    dispatcher,
    collector,
    audit,
    credentials,
    workers,
    /** Defined when metrics are on (COFFER_METRICS_PORT). */
    metrics,
  };
}

export type Services = ReturnType<typeof createServices>;
