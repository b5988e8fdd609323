import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { publicErrors } from '../../http/error-responses.ts';
import { Ref } from '../../http/schemas.ts';
import type { Cache } from '../../infra/cache.ts';
import type { Db } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { checkReadiness } from './readiness.ts';
import { Liveness, Readiness } from './schemas.ts';

export function healthRoutes(db: Db, cache: Cache, store: ObjectStore): FastifyPluginAsyncTypebox {
  return async (app) => {
    const live = {
      config: { access: 'public' as const, limitGroup: 'none' as const },
      schema: {
        tags: ['Health'],
        operationId: 'getHealthLive',
        summary: 'Liveness: no dependency checks',
        response: { 200: Ref(Liveness), ...publicErrors() },
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
        config: { access: 'public', limitGroup: 'none' },
        schema: {
          tags: ['Health'],
          operationId: 'getHealthReady',
          summary: 'Readiness: database, cache and object store reachable',
          response: { ...publicErrors(), 200: Ref(Readiness), 503: Ref(Readiness) },
        },
      },
      async (_request, reply) => {
        const checks = await checkReadiness(db, cache, store);
        const ok = Object.values(checks).every((state) => state === 'ok');
        return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'degraded', checks });
      },
    );
  };
}
