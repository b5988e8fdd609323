import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { parseClamdUrl } from './infra/scanner/clamd.ts';
import { KEY_FORMAT, parseKey } from './lib/encryption.ts';

/** Everything Coffer reads from its environment, validated once at start. */
export interface Config {
  port: number;
  host: string;
  publicUrl: string;
  dataDir: string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  storage: StorageConfig;
  adminKey: string | undefined;
  clamdUrl: string | undefined;
  webhookRetrySchedule: number[];
  webhookTimeoutMs: number;
  webhookAllowPrivateNetworks: boolean;
  gcGraceSeconds: number;
  /** How often collection and the reaping of expired multipart sessions run (once per deployment). */
  gcIntervalSeconds: number;
  /** Lease of a claimed background job, renewed while it runs: a dead worker's job returns after it. */
  jobLeaseSeconds: number;
  /** How long scans (and checksums) are retried while the scanner or the store is unavailable. */
  scanRetryWindowSeconds: number;
  trustProxy: boolean;
  corsOrigins: string[] | '*';
  uploadUrlTtlSeconds: number;
  multipartExpirySeconds: number;
  rateLimits: RateLimitConfig;
  logLevel: string;
  /** Audit log entries older than this are pruned. */
  auditRetentionDays: number;
  /** Where `GET /metrics` listens, apart from the API; undefined (no metrics) unless COFFER_METRICS_PORT is set. */
  metrics: { host: string; port: number } | undefined;
  /**
   * The server key (32 bytes) that S3 secrets are stored and session tokens sealed under; undefined:
   * the embedded database's `$COFFER_DATA_DIR/secret.key` (see secret-key.ts), refused on PostgreSQL.
   */
  secretKey: Buffer | undefined;
  /** The region S3 clients sign requests to the /s3 endpoint with. */
  s3ApiRegion: string;
  images: ImageConfig;
}

/** Bounds of image renditions (README, Image renditions). */
export interface ImageConfig {
  /** Decoded pixels a source may have; past it 422 IMAGE_TOO_LARGE, read from the header alone. */
  maxPixels: number;
  /** Stored bytes a source may have; past it 422 IMAGE_TOO_LARGE, before anything is read. */
  maxSourceBytes: number;
  /** Stored bytes of all renditions together; the least recently used go first past it. */
  renditionCacheBytes: number;
  /** Renders at once in this process; more wait in a queue, and past it 503 RENDER_BUSY. */
  renderConcurrency: number;
  /** A render running longer is stopped (422 IMAGE_TOO_LARGE). */
  renderTimeoutSeconds: number;
}

/** Requests a minute each counter allows (0: no limit); see README, Rate limits. */
export interface RateLimitConfig {
  /** Per API key (the admin key is exempt); a project's `rate_limit_per_minute` overrides it for its keys. */
  apiKeyPerMinute: number;
  uploadTokenPerMinute: number;
  /** Per client IP: requests without a credential (public routes, unknown paths). */
  ipPerMinute: number;
  /** Per client IP: answers 401; past it the address is refused whatever it sends, until the minute ends. */
  authFailuresPerMinute: number;
  /** Per client IP: requests to presigned object URLs of the local store. */
  objectsPerMinute: number;
}

export type StorageConfig =
  | { kind: 'local' }
  | {
      kind: 's3';
      bucket: string;
      endpoint: string | undefined;
      region: string;
      accessKeyId: string | undefined;
      secretAccessKey: string | undefined;
      forcePathStyle: boolean;
      /** Per attempt: connecting, and waiting for a response's headers. */
      timeoutMs: number;
    };

/** A configuration value that cannot be used; the message names the variable. */
export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function fail(name: string, expected: string, value: string): never {
  throw new ConfigError(`${name}: expected ${expected}, got ${JSON.stringify(value)}`);
}

function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === '' ? undefined : value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
    fail(name, `an integer from ${min} to ${max}`, raw);
  }
  return value;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const lowered = raw.toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(lowered)) return true;
  if (['false', '0', 'no', 'off'].includes(lowered)) return false;
  return fail(name, 'true or false', raw);
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = read(env, name);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    return fail(name, `a URL (${protocols.join(' or ')})`, raw);
  }
  if (!protocols.includes(parsed.protocol)) fail(name, `a URL (${protocols.join(' or ')})`, raw);
  return raw;
}

/** The longest delay a retry may wait: beyond it the schedule is surely a typo. */
const MAX_RETRY_DELAY_SECONDS = 30 * 86_400;

function retrySchedule(env: Env): number[] {
  const name = 'COFFER_WEBHOOK_RETRY_SCHEDULE';
  const raw = read(env, name) ?? '0,30,300,3600,21600';
  const parts = raw.split(',').map((part) => part.trim());
  // Plain decimals only: Number() would also read '' as 0, '0x10' as 16 and '1e20' as a delay
  // too large for a timestamp.
  const delays = parts.map((part) => (/^\d+(\.\d+)?$/.test(part) ? Number(part) : Number.NaN));
  if (delays.length !== 5 || delays.some((d) => !(d <= MAX_RETRY_DELAY_SECONDS))) {
    fail(name, `five comma-separated decimal numbers of seconds from 0 to ${MAX_RETRY_DELAY_SECONDS}`, raw);
  }
  return delays;
}

function corsOrigins(env: Env): string[] | '*' {
  const name = 'COFFER_CORS_ORIGINS';
  const raw = read(env, name) ?? '*';
  if (raw === '*') return '*';
  const origins = raw.split(',').map((o) => o.trim());
  for (const origin of origins) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (!parsed || parsed.origin !== origin)
      fail(name, '* or comma-separated origins like https://app.example.com', raw);
  }
  return origins;
}

function clamdUrl(env: Env): string | undefined {
  const name = 'COFFER_CLAMD_URL';
  const raw = read(env, name);
  if (raw === undefined) return undefined;
  // The scanner's own parser, so that what passes here cannot fail when the scanner is created.
  try {
    parseClamdUrl(raw);
  } catch {
    fail(name, 'tcp://host:port or an absolute unix socket path (/path or unix:/path)', raw);
  }
  return raw;
}

function storage(env: Env): StorageConfig {
  const kind = read(env, 'COFFER_STORAGE') ?? 'local';
  if (kind === 'local') return { kind };
  if (kind !== 's3') return fail('COFFER_STORAGE', 'local or s3', kind);
  const bucket = read(env, 'COFFER_S3_BUCKET');
  if (!bucket) return fail('COFFER_S3_BUCKET', 'a bucket name when COFFER_STORAGE=s3', '');
  const accessKeyId = read(env, 'COFFER_S3_ACCESS_KEY_ID');
  const secretAccessKey = read(env, 'COFFER_S3_SECRET_ACCESS_KEY');
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    // Never echo the secret: name the variables only.
    throw new ConfigError(
      'COFFER_S3_ACCESS_KEY_ID / COFFER_S3_SECRET_ACCESS_KEY: set both, or neither (the AWS default credential chain)',
    );
  }
  return {
    kind,
    bucket,
    endpoint: url(env, 'COFFER_S3_ENDPOINT', ['http:', 'https:']),
    region: read(env, 'COFFER_S3_REGION') ?? 'us-east-1',
    accessKeyId,
    secretAccessKey,
    forcePathStyle: boolean(env, 'COFFER_S3_FORCE_PATH_STYLE', false),
    timeoutMs: integer(env, 'COFFER_S3_TIMEOUT_MS', 10_000, 100, 600_000),
  };
}

function adminKey(env: Env): string | undefined {
  const raw = read(env, 'COFFER_ADMIN_KEY');
  if (raw !== undefined && !/^coffer_admin_[A-Za-z0-9_-]{32,}$/.test(raw)) {
    // Never echo a secret back, not even a malformed one.
    throw new ConfigError(
      'COFFER_ADMIN_KEY: expected coffer_admin_ followed by at least 32 base62/base64url characters',
    );
  }
  return raw;
}

function secretKey(env: Env): Buffer | undefined {
  const raw = read(env, 'COFFER_SECRET_KEY');
  if (raw === undefined) return undefined;
  const key = parseKey(raw);
  // Never echo a secret back, not even a malformed one.
  if (!key) throw new ConfigError(`COFFER_SECRET_KEY: expected ${KEY_FORMAT}`);
  return key;
}

function s3ApiRegion(env: Env): string {
  const name = 'COFFER_S3_API_REGION';
  const raw = read(env, name) ?? 'us-east-1';
  // It is a field of every signature's credential scope, which slashes separate.
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(raw)) fail(name, 'a region name of letters, digits, - and _', raw);
  return raw;
}

function metrics(env: Env, apiPort: number): Config['metrics'] {
  const name = 'COFFER_METRICS_PORT';
  if (read(env, name) === undefined) return undefined;
  const port = integer(env, name, 0, 1, 65535);
  // The API port never serves the metrics: the two must not be the same listener.
  if (port === apiPort) fail(name, 'a port other than PORT', String(port));
  return { host: read(env, 'COFFER_METRICS_HOST') ?? '127.0.0.1', port };
}

function rateLimits(env: Env): RateLimitConfig {
  const perMinute = (name: string, fallback: number) => integer(env, name, fallback, 0, 100_000_000);
  return {
    apiKeyPerMinute: perMinute('COFFER_RATE_LIMIT_API_KEY_PER_MINUTE', 60_000),
    uploadTokenPerMinute: perMinute('COFFER_RATE_LIMIT_UPLOAD_TOKEN_PER_MINUTE', 6_000),
    ipPerMinute: perMinute('COFFER_RATE_LIMIT_IP_PER_MINUTE', 3_000),
    authFailuresPerMinute: perMinute('COFFER_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE', 60),
    objectsPerMinute: perMinute('COFFER_RATE_LIMIT_OBJECTS_PER_MINUTE', 60_000),
  };
}

const TRACE_EXPORTERS = ['otlp', 'console', 'none'];
const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

/**
 * Whether to trace (OpenTelemetry), from the standard variables only: on when OTEL_TRACES_EXPORTER
 * names an exporter, or an OTLP endpoint is set; off when OTEL_SDK_DISABLED=true or the exporter is
 * `none`. Everything else (endpoint, headers, service name, sampler) the SDK reads itself.
 */
export function tracingRequested(env: Env = process.env): boolean {
  if (read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return false;
  const exporters = read(env, 'OTEL_TRACES_EXPORTER')
    ?.split(',')
    .map((name) => name.trim());
  if (exporters) {
    const unknown = exporters.find((name) => !TRACE_EXPORTERS.includes(name));
    if (unknown !== undefined) fail('OTEL_TRACES_EXPORTER', TRACE_EXPORTERS.join(', '), unknown);
  }
  const on = exporters
    ? exporters.some((name) => name !== 'none')
    : read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined ||
      read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== undefined;
  const protocol =
    read(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? read(env, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  if (on && protocol !== undefined && !protocol.startsWith('http/')) {
    fail(
      'OTEL_EXPORTER_OTLP_PROTOCOL',
      'http/json or http/protobuf (Coffer exports over OTLP/HTTP)',
      protocol,
    );
  }
  const sampler = read(env, 'OTEL_TRACES_SAMPLER');
  if (on && sampler !== undefined && !SAMPLERS.includes(sampler)) {
    fail('OTEL_TRACES_SAMPLER', SAMPLERS.join(', '), sampler);
  }
  const ratio = read(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (on && ratio !== undefined && !(/^\d*\.?\d+$/.test(ratio) && Number(ratio) <= 1)) {
    fail('OTEL_TRACES_SAMPLER_ARG', 'a ratio from 0 to 1', ratio);
  }
  return on;
}

function images(env: Env): ImageConfig {
  return {
    maxPixels: integer(env, 'COFFER_IMAGE_MAX_PIXELS', 50_000_000, 1, 1_000_000_000),
    maxSourceBytes: integer(env, 'COFFER_IMAGE_MAX_SOURCE_BYTES', 26_214_400, 1, 1024 ** 3),
    renditionCacheBytes: integer(
      env,
      'COFFER_RENDITION_CACHE_BYTES',
      10 * 1024 ** 3,
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    renderConcurrency: integer(env, 'COFFER_RENDER_CONCURRENCY', availableParallelism(), 1, 1024),
    renderTimeoutSeconds: integer(env, 'COFFER_RENDER_TIMEOUT_SECONDS', 30, 1, 3600),
  };
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  const port = integer(env, 'PORT', 8080, 0, 65535);
  const host = read(env, 'HOST') ?? '127.0.0.1';
  const publicUrl = (
    url(env, 'COFFER_PUBLIC_URL', ['http:', 'https:']) ?? `http://localhost:${port}`
  ).replace(/\/+$/, '');
  const logLevel = read(env, 'COFFER_LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) fail('COFFER_LOG_LEVEL', LOG_LEVELS.join(', '), logLevel);
  return {
    port,
    host,
    publicUrl,
    dataDir: resolve(read(env, 'COFFER_DATA_DIR') ?? './data'),
    databaseUrl: url(env, 'COFFER_DATABASE_URL', ['postgres:', 'postgresql:']),
    redisUrl: url(env, 'COFFER_REDIS_URL', ['redis:', 'rediss:']),
    storage: storage(env),
    adminKey: adminKey(env),
    clamdUrl: clamdUrl(env),
    webhookRetrySchedule: retrySchedule(env),
    webhookTimeoutMs: integer(env, 'COFFER_WEBHOOK_TIMEOUT_MS', 10_000, 1, 600_000),
    webhookAllowPrivateNetworks: boolean(env, 'COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
    gcGraceSeconds: integer(env, 'COFFER_GC_GRACE_SECONDS', 86_400, 0, 31_536_000),
    gcIntervalSeconds: integer(env, 'COFFER_GC_INTERVAL_SECONDS', 60, 1, 86_400),
    jobLeaseSeconds: integer(env, 'COFFER_JOB_LEASE_SECONDS', 30, 1, 3600),
    scanRetryWindowSeconds: integer(env, 'COFFER_SCAN_RETRY_WINDOW_SECONDS', 86_400, 0, 31_536_000),
    trustProxy: boolean(env, 'COFFER_TRUST_PROXY', false),
    corsOrigins: corsOrigins(env),
    uploadUrlTtlSeconds: integer(env, 'COFFER_UPLOAD_URL_TTL_SECONDS', 3600, 1, 604_800),
    multipartExpirySeconds: integer(env, 'COFFER_MULTIPART_EXPIRY_SECONDS', 604_800, 1, 31_536_000),
    rateLimits: rateLimits(env),
    logLevel,
    auditRetentionDays: integer(env, 'COFFER_AUDIT_RETENTION_DAYS', 365, 1, 36_500),
    metrics: metrics(env, port),
    secretKey: secretKey(env),
    s3ApiRegion: s3ApiRegion(env),
    images: images(env),
  };
}
