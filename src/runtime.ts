import pino, { type Logger } from 'pino';
import { type Config, ConfigError } from './config.ts';
import { type Cache, memoryCache, redisCache } from './infra/cache.ts';
import { type Db, openPglite, openPostgres } from './infra/db.ts';
import { withQuerySpans } from './infra/db-spans.ts';
import { migrate } from './infra/migrate.ts';
import { createScanner } from './infra/scanner/index.ts';
import { loadOrCreateSecretKey, SecretKeyFileError } from './infra/secret-key.ts';
import { getOrCreateSetting } from './infra/server-settings.ts';
import { withSpans } from './infra/spans.ts';
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
  return withQuerySpans(
    config.databaseUrl ? await openPostgres(config.databaseUrl) : await openPglite(config.dataDir),
  );
}

/**
 * The server key: COFFER_SECRET_KEY, else (embedded database only) the data dir's key file, made on
 * the first start. Servers sharing a PostgreSQL database must share one key, which no file in a data
 * dir of one of them can guarantee: there the variable is required.
 */
async function resolveSecretKey(config: Config, kind: Db['kind'], logger: Logger): Promise<Buffer> {
  if (config.secretKey) return config.secretKey;
  if (kind === 'postgres') {
    throw new ConfigError(
      'COFFER_SECRET_KEY: required with PostgreSQL, the same on every server: 32 bytes in base64 (openssl rand -base64 32)',
    );
  }
  try {
    const { key, created } = await loadOrCreateSecretKey(config.dataDir);
    if (created) logger.info('generated the server key in the data dir (secret.key)');
    return key;
  } catch (error) {
    if (error instanceof SecretKeyFileError) throw new ConfigError(error.message);
    throw error;
  }
}

/** Opens the database (migrated), the cache and the object store that `config` names, and wires the services. */
export async function openRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  const logger = options.logger ?? createLogger(config);
  // Before anything is opened: a deployment that cannot have its key does not start.
  const kind = options.db?.kind ?? (config.databaseUrl ? 'postgres' : 'pglite');
  const secretKey = await resolveSecretKey(config, kind, logger);
  const db = options.db ?? (await openDatabase(config));
  const applied = await migrate(db);
  if (applied.length > 0) logger.info({ migrations: applied }, 'database migrated');
  // Spans around the Redis cache's calls (each with its command's span below); the in-process
  // cache's are lookups in a Map, not worth a span each.
  const cache =
    options.cache ??
    (config.redisUrl
      ? withSpans(await redisCache(config.redisUrl), 'cache', ['get', 'set', 'del'])
      : memoryCache());
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
    secretKey,
    webhookCa: options.webhookCa,
  });
  return {
    services,
    generatedAdminKey: admin.generated,
    async close() {
      await services.renditions.flushUses();
      await store.close();
      if (!options.cache) await cache.close();
      if (!options.db) await db.close();
    },
  };
}
