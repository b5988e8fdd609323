import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { openPglite } from '../../src/infra/db.ts';
import { loadOrCreateSecretKey } from '../../src/infra/secret-key.ts';
import { openRuntime } from '../../src/runtime.ts';

describe('configuration', () => {
  it('has the contract defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      publicUrl: 'http://localhost:8080',
      databaseUrl: undefined,
      redisUrl: undefined,
      storage: { kind: 'local' },
      webhookRetrySchedule: [0, 30, 300, 3600, 21600],
      webhookTimeoutMs: 10000,
      webhookAllowPrivateNetworks: false,
      gcGraceSeconds: 86400,
      trustProxy: false,
      corsOrigins: '*',
      uploadUrlTtlSeconds: 3600,
      multipartExpirySeconds: 604800,
      scanRetryWindowSeconds: 86400,
      jobLeaseSeconds: 30,
      gcIntervalSeconds: 60,
      secretKey: undefined,
      s3ApiRegion: 'us-east-1',
      images: {
        maxPixels: 50_000_000,
        maxSourceBytes: 26_214_400,
        renditionCacheBytes: 10 * 1024 ** 3,
        renderConcurrency: availableParallelism(),
        renderTimeoutSeconds: 30,
      },
    });
    expect(config.dataDir).toMatch(/\/data$/);
  });

  it('reads every variable', () => {
    const config = loadConfig({
      PORT: '9000',
      HOST: '0.0.0.0',
      COFFER_PUBLIC_URL: 'https://files.example.com/',
      COFFER_DATABASE_URL: 'postgres://u@db/coffer',
      COFFER_REDIS_URL: 'redis://cache:6379',
      COFFER_CLAMD_URL: 'tcp://clamd:3310',
      COFFER_WEBHOOK_RETRY_SCHEDULE: '0,0.5,1,2,3',
      COFFER_WEBHOOK_TIMEOUT_MS: '500',
      COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      COFFER_GC_GRACE_SECONDS: '0',
      COFFER_TRUST_PROXY: 'true',
      COFFER_CORS_ORIGINS: 'https://a.example.com,http://localhost:3000',
      COFFER_UPLOAD_URL_TTL_SECONDS: '60',
      COFFER_MULTIPART_EXPIRY_SECONDS: '120',
      COFFER_SCAN_RETRY_WINDOW_SECONDS: '0',
      COFFER_JOB_LEASE_SECONDS: '5',
      COFFER_GC_INTERVAL_SECONDS: '10',
      COFFER_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
      COFFER_S3_API_REGION: 'eu-west-3',
      COFFER_IMAGE_MAX_PIXELS: '1000000',
      COFFER_IMAGE_MAX_SOURCE_BYTES: '1048576',
      COFFER_RENDITION_CACHE_BYTES: '0',
      COFFER_RENDER_CONCURRENCY: '3',
      COFFER_RENDER_TIMEOUT_SECONDS: '5',
    });
    expect(config).toMatchObject({
      port: 9000,
      host: '0.0.0.0',
      publicUrl: 'https://files.example.com',
      databaseUrl: 'postgres://u@db/coffer',
      redisUrl: 'redis://cache:6379',
      clamdUrl: 'tcp://clamd:3310',
      webhookRetrySchedule: [0, 0.5, 1, 2, 3],
      webhookTimeoutMs: 500,
      webhookAllowPrivateNetworks: true,
      gcGraceSeconds: 0,
      trustProxy: true,
      corsOrigins: ['https://a.example.com', 'http://localhost:3000'],
      uploadUrlTtlSeconds: 60,
      multipartExpirySeconds: 120,
      scanRetryWindowSeconds: 0,
      jobLeaseSeconds: 5,
      gcIntervalSeconds: 10,
      secretKey: Buffer.alloc(32, 7),
      s3ApiRegion: 'eu-west-3',
      images: {
        maxPixels: 1_000_000,
        maxSourceBytes: 1_048_576,
        renditionCacheBytes: 0,
        renderConcurrency: 3,
        renderTimeoutSeconds: 5,
      },
    });
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['COFFER_PUBLIC_URL', 'not a url'],
    ['COFFER_DATABASE_URL', 'mysql://x'],
    ['COFFER_REDIS_URL', 'http://x'],
    ['COFFER_STORAGE', 'ftp'],
    ['COFFER_CLAMD_URL', 'clamd:3310'],
    ['COFFER_CLAMD_URL', 'unix:relative.sock'],
    ['COFFER_CLAMD_URL', 'tcp://clamd:0'],
    ['COFFER_CLAMD_URL', 'tcp://clamd'],
    ['COFFER_CLAMD_URL', 'http://clamd:3310'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '1,2,3'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '0,30,-1,3600,21600'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '0,,300,3600,21600'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '0,0x10,300,3600,21600'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '0,30,300,3600,1e20'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '0,30,300,3600,2592001'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '0,30,.5,3600,21600'],
    ['COFFER_WEBHOOK_RETRY_SCHEDULE', '0,30,300,3600,Infinity'],
    ['COFFER_WEBHOOK_TIMEOUT_MS', '0'],
    ['COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'maybe'],
    ['COFFER_GC_GRACE_SECONDS', '-5'],
    ['COFFER_TRUST_PROXY', '2'],
    ['COFFER_CORS_ORIGINS', 'example.com'],
    ['COFFER_UPLOAD_URL_TTL_SECONDS', '1.5'],
    ['COFFER_MULTIPART_EXPIRY_SECONDS', 'week'],
    ['COFFER_SCAN_RETRY_WINDOW_SECONDS', '-1'],
    ['COFFER_JOB_LEASE_SECONDS', '0'],
    ['COFFER_GC_INTERVAL_SECONDS', '0.5'],
    ['COFFER_ADMIN_KEY', 'short'],
    ['COFFER_RATE_LIMIT_API_KEY_PER_MINUTE', '-1'],
    ['COFFER_RATE_LIMIT_UPLOAD_TOKEN_PER_MINUTE', '1.5'],
    ['COFFER_RATE_LIMIT_IP_PER_MINUTE', 'many'],
    ['COFFER_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE', '100000001'],
    ['COFFER_RATE_LIMIT_OBJECTS_PER_MINUTE', '1e6'],
    ['COFFER_SECRET_KEY', 'short'],
    ['COFFER_SECRET_KEY', randomBytes(16).toString('base64')],
    ['COFFER_SECRET_KEY', randomBytes(33).toString('base64')],
    ['COFFER_S3_API_REGION', 'eu/west-3'],
    ['COFFER_S3_API_REGION', 'x'.repeat(65)],
    ['COFFER_IMAGE_MAX_PIXELS', '0'],
    ['COFFER_IMAGE_MAX_SOURCE_BYTES', '25MB'],
    ['COFFER_RENDITION_CACHE_BYTES', '-1'],
    ['COFFER_RENDER_CONCURRENCY', '0'],
    ['COFFER_RENDER_TIMEOUT_SECONDS', '0'],
  ])('rejects %s=%s naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^${name}: expected`));
  });

  it.each([
    ['/run/clamav/clamd.ctl'],
    ['unix:/run/clamav/clamd.ctl'],
    ['unix:///run/clamav/clamd.ctl'],
    ['tcp://[::1]:3310'],
  ])('accepts COFFER_CLAMD_URL=%s', (value) => {
    expect(loadConfig({ COFFER_CLAMD_URL: value }).clamdUrl).toBe(value);
  });

  it('reads the rate limits, 0 turning one off, with defaults that leave busy clients room', () => {
    expect(loadConfig({}).rateLimits).toEqual({
      apiKeyPerMinute: 60_000,
      uploadTokenPerMinute: 6_000,
      ipPerMinute: 3_000,
      authFailuresPerMinute: 60,
      objectsPerMinute: 60_000,
    });
    expect(
      loadConfig({
        COFFER_RATE_LIMIT_API_KEY_PER_MINUTE: '600',
        COFFER_RATE_LIMIT_UPLOAD_TOKEN_PER_MINUTE: '120',
        COFFER_RATE_LIMIT_IP_PER_MINUTE: '0',
        COFFER_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '10',
        COFFER_RATE_LIMIT_OBJECTS_PER_MINUTE: '100000000',
      }).rateLimits,
    ).toEqual({
      apiKeyPerMinute: 600,
      uploadTokenPerMinute: 120,
      ipPerMinute: 0,
      authFailuresPerMinute: 10,
      objectsPerMinute: 100_000_000,
    });
  });

  it('accepts retry delays up to 30 days, with fractions', () => {
    expect(
      loadConfig({ COFFER_WEBHOOK_RETRY_SCHEDULE: ' 0, 1.25 ,300,3600,2592000' }).webhookRetrySchedule,
    ).toEqual([0, 1.25, 300, 3600, 2_592_000]);
  });

  it('reads the S3 store settings', () => {
    const s3 = { COFFER_STORAGE: 's3', COFFER_S3_BUCKET: 'files' };
    expect(loadConfig(s3).storage).toEqual({
      kind: 's3',
      bucket: 'files',
      endpoint: undefined,
      region: 'us-east-1',
      accessKeyId: undefined,
      secretAccessKey: undefined,
      forcePathStyle: false,
      timeoutMs: 10_000,
    });
    expect(
      loadConfig({
        ...s3,
        COFFER_S3_ENDPOINT: 'http://minio:9000',
        COFFER_S3_REGION: 'auto',
        COFFER_S3_ACCESS_KEY_ID: 'AKIA',
        COFFER_S3_SECRET_ACCESS_KEY: 'shh',
        COFFER_S3_FORCE_PATH_STYLE: 'true',
        COFFER_S3_TIMEOUT_MS: '2500',
      }).storage,
    ).toMatchObject({ endpoint: 'http://minio:9000', region: 'auto', forcePathStyle: true, timeoutMs: 2500 });
    expect(() => loadConfig({ COFFER_STORAGE: 's3' })).toThrow(/^COFFER_S3_BUCKET: expected/);
    expect(() => loadConfig({ ...s3, COFFER_S3_ENDPOINT: 'ftp://x' })).toThrow(
      /^COFFER_S3_ENDPOINT: expected/,
    );
    expect(() => loadConfig({ ...s3, COFFER_S3_TIMEOUT_MS: '0' })).toThrow(/^COFFER_S3_TIMEOUT_MS: expected/);
    expect(() => loadConfig({ COFFER_STORAGE: 'gcs' })).toThrow(/^COFFER_STORAGE: expected local or s3/);
    // One key without the other is a mistake, named without echoing the secret.
    expect(() => loadConfig({ ...s3, COFFER_S3_SECRET_ACCESS_KEY: 'top-secret' })).toThrow(
      /^COFFER_S3_ACCESS_KEY_ID/,
    );
    try {
      loadConfig({ ...s3, COFFER_S3_SECRET_ACCESS_KEY: 'top-secret' });
    } catch (error) {
      expect((error as Error).message).not.toContain('top-secret');
    }
  });

  it('never echoes a malformed admin key', () => {
    expect(() => loadConfig({ COFFER_ADMIN_KEY: 'coffer_admin_secret' })).toThrow(/^COFFER_ADMIN_KEY/);
    try {
      loadConfig({ COFFER_ADMIN_KEY: 'coffer_admin_secret' });
    } catch (error) {
      expect((error as Error).message).not.toContain('secret');
    }
  });

  it('stops the process with exit code 2 and one line on a bad value', () => {
    const result = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
      env: { ...process.env, PORT: 'eighty' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      'Invalid configuration: PORT: expected an integer from 0 to 65535, got "eighty"',
    ]);
  });

  it('stops before opening anything on a clamd URL the scanner could not use', () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-config-'));
    const result = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
      env: { ...process.env, PORT: '0', COFFER_DATA_DIR: dir, COFFER_CLAMD_URL: 'unix:relative.sock' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^Invalid configuration: COFFER_CLAMD_URL: expected .*"unix:relative.sock"$/),
    ]);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('reads COFFER_SECRET_KEY in base64 or base64url, and never echoes it', () => {
    const key = randomBytes(32);
    expect(loadConfig({ COFFER_SECRET_KEY: key.toString('base64') }).secretKey).toEqual(key);
    expect(loadConfig({ COFFER_SECRET_KEY: key.toString('base64url') }).secretKey).toEqual(key);
    const wrong = randomBytes(24).toString('base64');
    expect(() => loadConfig({ COFFER_SECRET_KEY: wrong })).toThrow(
      'COFFER_SECRET_KEY: expected 32 bytes in base64 (openssl rand -base64 32)',
    );
    try {
      loadConfig({ COFFER_SECRET_KEY: wrong });
    } catch (error) {
      expect((error as Error).message).not.toContain(wrong);
    }
  });

  it('refuses to start on PostgreSQL without COFFER_SECRET_KEY, with one line and before opening anything', () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-config-'));
    const result = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
      env: {
        ...process.env,
        PORT: '0',
        COFFER_DATA_DIR: dir,
        // Never reached: the key is checked first.
        COFFER_DATABASE_URL: 'postgres://coffer@127.0.0.1:1/none',
        COFFER_SECRET_KEY: '',
      },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^Invalid configuration: COFFER_SECRET_KEY: required with PostgreSQL/),
    ]);
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('the server key of the embedded database', () => {
  const open = async (dataDir: string, env: Record<string, string> = {}) => {
    const config = loadConfig({ COFFER_DATA_DIR: dataDir, COFFER_LOG_LEVEL: 'silent', ...env });
    const db = await openPglite(undefined);
    try {
      const runtime = await openRuntime(config, { db, logger: pino({ level: 'silent' }) });
      const key = runtime.services.secretKey;
      await runtime.close();
      return key;
    } finally {
      await db.close();
    }
  };

  it('is generated into secret.key (mode 0600) on the first start and read on the next ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-key-'));
    const first = await open(dir);
    expect(first).toHaveLength(32);
    const path = join(dir, 'secret.key');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, 'utf8')).toBe(`${first.toString('base64')}\n`);
    // Written whole through a temporary file, which is gone.
    expect(readdirSync(dir).filter((name) => name.startsWith('secret.key'))).toEqual(['secret.key']);
    expect(await open(dir)).toEqual(first);
  });

  it('is COFFER_SECRET_KEY when set, and no file is written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-key-'));
    const key = randomBytes(32);
    expect(await open(dir, { COFFER_SECRET_KEY: key.toString('base64') })).toEqual(key);
    expect(readdirSync(dir)).not.toContain('secret.key');
  });

  it('refuses a secret.key that holds no key, naming the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-key-'));
    writeFileSync(join(dir, 'secret.key'), 'garbage\n');
    const error = await open(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(
      `${join(dir, 'secret.key')}: expected 32 bytes in base64 (openssl rand -base64 32)`,
    );
    expect(readFileSync(join(dir, 'secret.key'), 'utf8')).toBe('garbage\n');
  });

  it('gives two processes racing on a fresh data dir one key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-key-'));
    const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateSecretKey(dir)));
    expect(keys.filter((outcome) => outcome.created)).toHaveLength(1);
    for (const outcome of keys) expect(outcome.key).toEqual(keys[0]!.key);
  });
});
