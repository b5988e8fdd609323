import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Credentials } from './http/auth.ts';
import { type Cache, noCache } from './infra/cache.ts';
import type { Db } from './infra/db.ts';
import type { Scanner } from './infra/scanner/index.ts';
import type { ObjectStore } from './infra/storage/object-store.ts';
import { createCollector } from './modules/files/collector.ts';
import { createFileService } from './modules/files/service.ts';
import { createFolderService } from './modules/folders/service.ts';
import { createMetadataSchemaService } from './modules/metadata-schema/service.ts';
import { createPipeline } from './modules/pipeline/service.ts';
import { createProjectService } from './modules/projects/service.ts';
import { createMultipartService } from './modules/uploads/multipart.ts';
import { createUploadService } from './modules/uploads/service.ts';
import { createUploadTokenService } from './modules/uploads/tokens.ts';
import { createVersionService } from './modules/versions/service.ts';
import { createDispatcher } from './modules/webhooks/dispatcher.ts';
import { createWebhookService } from './modules/webhooks/service.ts';
import type { Worker } from './workers.ts';

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

/** The composition root: every service, wired to the infrastructure it was given. */
export function createServices(infra: Infra) {
  const { config, db, cache, store } = infra;
  // Key and project lookups may be cached only where a revocation or a settings change reaches
  // every server at once: in a shared cache, or in process memory on the embedded database
  // (one process only). Several servers on one PostgreSQL without Redis read them afresh.
  const lookups = cache.shared || db.kind === 'pglite' ? cache : noCache();
  const projects = createProjectService(db, lookups);
  const folders = createFolderService(db);
  const schemas = createMetadataSchemaService(db);
  const files = createFileService({ db, store, folders, schemas });
  const uploads = createUploadService({ config, db, store, folders, schemas });
  const tokens = createUploadTokenService({ db, folders });
  const multipart = createMultipartService({ config, db, store, uploads, projects, logger: infra.logger });
  const versions = createVersionService({ config, db, store });
  const webhooks = createWebhookService({ db, allowPrivateNetworks: config.webhookAllowPrivateNetworks });
  const dispatcher = createDispatcher({
    db,
    logger: infra.logger,
    options: {
      retrySchedule: config.webhookRetrySchedule,
      timeoutMs: config.webhookTimeoutMs,
      allowPrivateNetworks: config.webhookAllowPrivateNetworks,
      ca: infra.webhookCa,
    },
  });
  const pipeline = createPipeline({ db, store, scanner: infra.scanner, projects, logger: infra.logger });
  const credentials: Credentials = {
    adminKeyHash: infra.adminKeyHash,
    projects,
    resolveUploadToken: (secret) => tokens.resolve(secret),
  };
  const collector = createCollector({ db, store, graceSeconds: config.gcGraceSeconds, logger: infra.logger });
  /** The background work `coffer serve` and `coffer worker` run. */
  const workers = (): Worker[] => [
    { name: 'collector', intervalMs: 60_000, run: () => collector.sweep() },
    { name: 'multipart-reaper', intervalMs: 60_000, run: () => multipart.reap() },
    { name: 'pipeline', intervalMs: 250, run: async () => (await pipeline.runOnce()) > 0 },
    {
      name: 'webhooks',
      intervalMs: 200,
      run: async () => (await dispatcher.runOnce()) > 0,
      stop: () => dispatcher.close(),
    },
  ];
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
    webhooks,
    dispatcher,
    collector,
    credentials,
    workers,
  };
}

export type Services = ReturnType<typeof createServices>;
