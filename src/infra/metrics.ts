import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/**
 * Coffer's Prometheus metrics: one registry per process, with the process's own metrics (CPU,
 * memory, event-loop lag, GC) and the counters and histograms the services observe as things
 * happen. Every label takes values from a small fixed set (route templates, methods, status codes,
 * outcomes) or from admin-created project ids: never a file id, an object key or a raw path.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    httpRequestDuration: new Histogram({
      name: 'coffer_http_request_duration_seconds',
      help: 'API requests by route template, method and status code, and how long each took',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120, 600],
      registers,
    }),
    localStoreBytes: new Counter({
      name: 'coffer_local_store_bytes_total',
      help: 'Bytes received (upload) and sent (download) through the presigned URLs of the local store',
      labelNames: ['direction'] as const,
      registers,
    }),
    uploads: new Counter({
      name: 'coffer_uploads_total',
      help: 'Uploads (single and multipart) by outcome: initiated, completed, aborted by the client, expired unfinished',
      labelNames: ['outcome'] as const,
      registers,
    }),
    s3Requests: new Counter({
      name: 'coffer_s3_requests_total',
      help: 'Requests to the S3-compatible endpoint by S3 operation (unsupported for those it does not serve) and status code',
      labelNames: ['operation', 'status_code'] as const,
      registers,
    }),
    scanDuration: new Histogram({
      name: 'coffer_scan_duration_seconds',
      help: 'How long the scan and type check of one file took, whether or not it reached a verdict',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      registers,
    }),
    scanVerdicts: new Counter({
      name: 'coffer_scan_verdicts_total',
      help: 'Verdicts of the processing pipeline: ready, quarantined or failed',
      labelNames: ['verdict'] as const,
      registers,
    }),
    usageDrift: new Counter({
      name: 'coffer_usage_drift_total',
      help: "Corrections of the projects' kept usage by the reconcile task, in files and in bytes (absolute differences of its counters); anything above 0 is worth a look",
      labelNames: ['unit'] as const,
      registers,
    }),
    webhookDeliveries: new Counter({
      name: 'coffer_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: delivered, retry (failed, tried again later), dead (failed for good), cancelled',
      labelNames: ['outcome'] as const,
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

export interface MetricsAddress {
  host: string;
  port: number;
}

export interface MetricsListener {
  /** The bound port (the configured one). */
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` on its own listener, apart from the API port, so that the metrics are
 * reachable only where the operator binds them (loopback unless told otherwise). Nothing when
 * metrics are off (no address or no metrics).
 */
export async function serveMetrics(
  address: MetricsAddress | undefined,
  metrics: Metrics | undefined,
  logger?: Logger,
): Promise<MetricsListener | undefined> {
  if (!address || !metrics) return undefined;
  const { registry } = metrics;
  const server: Server = createServer((request, response) => {
    const path = request.url?.split('?')[0];
    if (path !== '/metrics') {
      response
        .writeHead(404, { 'content-type': 'text/plain' })
        .end('Not found: the metrics are at /metrics\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response
        .writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' })
        .end('Method not allowed\n');
      return;
    }
    registry.metrics().then(
      (text) => {
        response.writeHead(200, { 'content-type': registry.contentType });
        response.end(request.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        logger?.error({ err: error }, 'metrics collection failed');
        response.writeHead(500, { 'content-type': 'text/plain' }).end('Metrics collection failed\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  logger?.info({ host: address.host, port }, 'metrics listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
