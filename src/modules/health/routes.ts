import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Ref } from '../../http/schemas.ts';
import type { Cache } from '../../infra/cache.ts';
import type { Db } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { Liveness, Readiness } from './schemas.ts';

/** A probe answers within about 2 s even when a dependency hangs. */
const CHECK_TIMEOUT_MS = 1500;

async function check(probe: () => Promise<void>): Promise<'ok' | 'unavailable'> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([probe(), deadline]);
    return 'ok';
  } catch {
    return 'unavailable';
  } finally {
    clearTimeout(timer);
  }
}

export function healthRoutes(db: Db, cache: Cache, store: ObjectStore): FastifyPluginAsyncTypebox {
  return async (app) => {
    const live = {
      config: { access: 'public' as const },
      schema: {
        tags: ['Health'],
        operationId: 'getHealthLive',
        summary: 'Liveness: no dependency checks',
        response: { 200: Ref(Liveness) },
      },
    };
    app.get('/health/live', live, async () => ({ status: 'ok' as const }));
    app.get(
      '/health',
      { ...live, schema: { ...live.schema, operationId: 'getHealth', summary: 'Alias of /health/live' } },
      async () => ({
        status: 'ok' as const,
      }),
    );
    app.get(
      '/health/ready',
      {
        config: { access: 'public' },
        schema: {
          tags: ['Health'],
          operationId: 'getHealthReady',
          summary: 'Readiness: database, cache and object store reachable',
          response: { 200: Ref(Readiness), 503: Ref(Readiness) },
        },
      },
      async (_request, reply) => {
        const [database, cacheState, storeState] = await Promise.all([
          check(() => db.ping(CHECK_TIMEOUT_MS)),
          check(() => cache.ping(CHECK_TIMEOUT_MS)),
          check(() => store.check()),
        ]);
        const ok = database === 'ok' && cacheState === 'ok' && storeState === 'ok';
        return reply.code(ok ? 200 : 503).send({
          status: ok ? 'ok' : 'degraded',
          checks: { database, cache: cacheState, store: storeState },
        });
      },
    );
  };
}
