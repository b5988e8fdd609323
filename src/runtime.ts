import pino, { type Logger } from 'pino';
import type { Config } from './config.ts';
import { type Cache, memoryCache, redisCache } from './infra/cache.ts';
import { type Db, openPglite, openPostgres } from './infra/db.ts';
import { migrate } from './infra/migrate.ts';
import { createScanner } from './infra/scanner/index.ts';
import { getOrCreateSetting } from './infra/server-settings.ts';
import { createObjectStore } from './infra/storage/index.ts';
import { randomSecret } from './lib/secrets.ts';
import { resolveAdminKey } from './modules/admin/admin-key.ts';
import { createServices, type Services } from './services.ts';

export function createLogger(config: Pick<Config, 'logLevel'>): Logger {
  return pino({
    level: config.logLevel,
    base: { service: 'coffer' },
    redact: {
      paths: ['req.headers.authorization', '*.authorization', '*.signing_secret', '*.key', '*.token'],
      remove: true,
    },
  });
}

export interface RuntimeOptions {
  logger?: Logger;
  /** Overrides for tests: an already open database (e.g. a schema of a shared server) or cache. */
  db?: Db;
  cache?: Cache;
  webhookCa?: string;
}

export interface Runtime {
  services: Services;
  /** The admin key when this start generated it: to be printed once, never logged. */
  generatedAdminKey: string | undefined;
  close(): Promise<void>;
}

export async function openDatabase(config: Config): Promise<Db> {
  return config.databaseUrl ? openPostgres(config.databaseUrl) : openPglite(config.dataDir);
}

/** Opens the database (migrated), the cache and the object store that `config` names, and wires the services. */
export async function openRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  const logger = options.logger ?? createLogger(config);
  const db = options.db ?? (await openDatabase(config));
  const applied = await migrate(db);
  if (applied.length > 0) logger.info({ migrations: applied }, 'database migrated');
  const cache = options.cache ?? (config.redisUrl ? await redisCache(config.redisUrl) : memoryCache());
  const urlSecret = await getOrCreateSetting(db, 'url_signing_secret', () => randomSecret());
  const store = await createObjectStore(config.storage, {
    dataDir: config.dataDir,
    publicUrl: config.publicUrl,
    urlSigningSecret: urlSecret.value,
  });
  const admin = await resolveAdminKey(db, config);
  const scanner = createScanner(config.clamdUrl, logger);
  const services = createServices({
    config,
    db,
    cache,
    store,
    scanner,
    logger,
    adminKeyHash: admin.hash,
    webhookCa: options.webhookCa,
  });
  return {
    services,
    generatedAdminKey: admin.generated,
    async close() {
      await store.close();
      if (!options.cache) await cache.close();
      if (!options.db) await db.close();
    },
  };
}
