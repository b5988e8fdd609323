import type { Logger } from 'pino';
import { backgroundWork } from './background.ts';
import type { Config } from './config.ts';
import type { Credentials } from './http/auth.ts';
import { type Cache, noCache } from './infra/cache.ts';
import type { Db } from './infra/db.ts';
import { createMetrics } from './infra/metrics.ts';
import type { Scanner } from './infra/scanner/index.ts';
import type { ObjectStore } from './infra/storage/object-store.ts';
import { createAuditService } from './modules/audit/service.ts';
import { createCollector } from './modules/files/collector.ts';
import { createFileService } from './modules/files/service.ts';
import { createFolderService } from './modules/folders/service.ts';
import { registerStateGauges } from './modules/health/gauges.ts';
import { createIngestService } from './modules/ingest/service.ts';
import { createMetadataSchemaService } from './modules/metadata-schema/service.ts';
import { createPipeline } from './modules/pipeline/service.ts';
import { createProjectService } from './modules/projects/service.ts';
import { createRenditionService } from './modules/renditions/service.ts';
import { createThumbnailer } from './modules/renditions/thumbnails.ts';
import { createS3CredentialService } from './modules/s3-credentials/service.ts';
import { createMultipartService } from './modules/uploads/multipart.ts';
import { createUploadService } from './modules/uploads/service.ts';
import { createUploadTokenService } from './modules/uploads/tokens.ts';
import { createUsageService } from './modules/usage/service.ts';
import { createVersionService } from './modules/versions/service.ts';
import { createDispatcher } from './modules/webhooks/dispatcher.ts';
import { createWebhookService } from './modules/webhooks/service.ts';

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
  /** The server key (COFFER_SECRET_KEY or the embedded data dir's secret.key). */
  secretKey: Buffer;
}

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
  const renditions = createRenditionService({
    db,
    store,
    images: config.images,
    secretKey: infra.secretKey,
    publicUrl: config.publicUrl,
    logger: infra.logger,
  });
  const ingest = createIngestService({ config, db, store, folders, schemas, metrics });
  const uploads = createUploadService({ store, ingest });
  const tokens = createUploadTokenService({ db, folders });
  const s3Credentials = createS3CredentialService({
    db,
    cache: lookups,
    projects,
    tokens,
    folders,
    secretKey: infra.secretKey,
    publicUrl: config.publicUrl,
    region: config.s3ApiRegion,
    logger: infra.logger,
  });
  const multipart = createMultipartService({
    config,
    db,
    store,
    ingest,
    projects,
    logger: infra.logger,
    metrics,
  });
  const versions = createVersionService({ db, store, ingest });
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
  const thumbnailer = createThumbnailer({
    db,
    projects,
    renditions,
    logger: infra.logger,
    options: { concurrency: config.images.renderConcurrency, leaseSeconds: config.jobLeaseSeconds },
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
  /** The background work `coffer serve` and `coffer worker` run (see background.ts). */
  const workers = () =>
    backgroundWork({
      config,
      db,
      store,
      logger: infra.logger,
      pipeline,
      thumbnailer,
      dispatcher,
      collector,
      multipart,
      usage,
      audit,
    });
  return {
    ...infra,
    projects,
    folders,
    schemas,
    files,
    renditions,
    thumbnailer,
    ingest,
    uploads,
    tokens,
    s3Credentials,
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
