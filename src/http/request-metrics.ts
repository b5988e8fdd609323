import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../infra/metrics.ts';

/**
 * Observes every response in the request histogram, labelled by the route's template (never the
 * raw path, which holds ids, object keys and signatures), the method and the status code.
 * A callback hook, so that it costs no promise per request.
 */
export function installRequestMetrics(app: FastifyInstance, metrics: Metrics): void {
  const { httpRequestDuration } = metrics;
  app.addHook('onResponse', (request, reply, done) => {
    httpRequestDuration.observe(
      {
        method: request.method,
        route: request.routeOptions.url ?? 'unmatched',
        status_code: reply.statusCode,
      },
      reply.elapsedTime / 1000,
    );
    done();
  });
}
