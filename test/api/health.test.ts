import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { redisCache } from '../../src/infra/cache.ts';
import { openPostgres } from '../../src/infra/db.ts';
import { openRuntime } from '../../src/runtime.ts';
import { backend, namespace, testSecretKeyEnv } from '../support/backends.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer } from '../support/coffer.ts';
import { startProxy } from '../support/proxy.ts';

describe('health probes', () => {
  let coffer: TestCoffer;
  beforeAll(async () => {
    coffer = await startCoffer();
  });
  afterAll(() => coffer.close());

  it.each(['/health/live', '/health'])('%s answers 200 {status: ok} without authentication', async (path) => {
    const reply = await coffer.call('GET', path);
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ status: 'ok' });
  });

  it('/health/ready checks the database and the cache', async () => {
    const reply = await coffer.call('GET', '/health/ready');
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ status: 'ok', checks: { database: 'ok', cache: 'ok', store: 'ok' } });
  });
});

describe.runIf(backend === 'postgres' && process.env.COFFER_TEST_REDIS_URL)(
  'readiness when dependencies go away',
  () => {
    it('answers 503 degraded within about 2 s while PostgreSQL or Redis is unreachable, and recovers by itself', async () => {
      const pgUrl = new URL(process.env.COFFER_TEST_DATABASE_URL!);
      const redisUrl = new URL(process.env.COFFER_TEST_REDIS_URL!);
      const pgProxy = await startProxy(pgUrl.hostname, Number(pgUrl.port || 5432));
      const redisProxy = await startProxy(redisUrl.hostname, Number(redisUrl.port || 6379));
      pgUrl.port = String(pgProxy.port);
      redisUrl.port = String(redisProxy.port);
      const config = loadConfig({
        PORT: '0',
        COFFER_ADMIN_KEY: ADMIN_KEY,
        COFFER_DATA_DIR: '/tmp/coffer-health',
        ...testSecretKeyEnv(),
      });
      const db = await openPostgres(pgUrl.toString(), { schema: namespace() });
      const cache = await redisCache(redisUrl.toString(), `${namespace()}:health:`);
      const runtime = await openRuntime(config, { db, cache, logger: pino({ level: 'silent' }) });
      const app = await buildApp({ config, services: runtime.services });
      const probe = async () => {
        const started = Date.now();
        const reply = await app.inject({ method: 'GET', url: '/health/ready' });
        return { status: reply.statusCode, body: reply.json(), ms: Date.now() - started };
      };
      try {
        expect((await probe()).status).toBe(200);

        await pgProxy.cut();
        const dbDown = await probe();
        expect(dbDown.status).toBe(503);
        expect(dbDown.body).toEqual({
          status: 'degraded',
          checks: { database: 'unavailable', cache: 'ok', store: 'ok' },
        });
        expect(dbDown.ms).toBeLessThan(2500);
        await pgProxy.restore();
        await expect.poll(async () => (await probe()).status, { timeout: 10_000, interval: 200 }).toBe(200);

        await redisProxy.cut();
        await expect
          .poll(async () => (await probe()).body.checks.cache, { timeout: 5_000, interval: 100 })
          .toBe('unavailable');
        const cacheDown = await probe();
        expect(cacheDown.status).toBe(503);
        expect(cacheDown.body.status).toBe('degraded');
        expect(cacheDown.ms).toBeLessThan(2500);
        // Requests still work from the database while the cache is away.
        expect(
          (
            await app.inject({
              method: 'GET',
              url: '/v1/organizations',
              headers: { authorization: `Bearer ${ADMIN_KEY}` },
            })
          ).statusCode,
        ).toBe(200);
        await redisProxy.restore();
        await expect.poll(async () => (await probe()).status, { timeout: 10_000, interval: 200 }).toBe(200);
      } finally {
        await app.close();
        await cache.close();
        await db.close();
        await pgProxy.close();
        await redisProxy.close();
      }
    });
  },
);
