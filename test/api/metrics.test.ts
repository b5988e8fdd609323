import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { eicarTestFile } from '../../src/infra/scanner/index.ts';
import { backend, storage } from '../support/backends.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, put } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import { processUntilSettled } from '../support/pipeline.ts';
import { startProcess, stopAll, until } from '../support/processes.ts';
import {
  type Exposition,
  type MetricType,
  parseExposition,
  type Sample,
  scrapeMetrics,
} from '../support/prometheus.ts';
import { type Receiver, startReceiver } from '../support/receiver.ts';

/** Ids as Coffer makes them (prefix_ULID): none may appear in a label. */
const ID = /\b[a-z]+_[0-9A-HJKMNP-TV-Z]{26}\b/;
const CLEAN = Buffer.from('clean bytes, counted on the way in and out\n'.repeat(100));

const scrape = scrapeMetrics;

/** The samples named `name` whose labels include `labels`. */
function series(metrics: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return metrics.samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value),
  );
}

/** The value of the one sample named `name` with `labels`. */
function value(metrics: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = series(metrics, name, labels);
  expect(found, `${name} ${JSON.stringify(labels)}`).toHaveLength(1);
  return found[0]!.value;
}

function expectType(metrics: Exposition, family: string, type: MetricType): void {
  expect(metrics.types.get(family), family).toBe(type);
}

describe('Prometheus metrics', () => {
  let receiver: Receiver;
  let coffer: TestCoffer;
  let metricsPort: number;
  let project: TestProject;

  beforeAll(async () => {
    receiver = await startReceiver();
    metricsPort = await freePort();
    coffer = await startCoffer(
      { COFFER_METRICS_PORT: String(metricsPort), COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
      { webhookCa: receiver.ca },
    );
    project = await coffer.newProject({ virus_scan_enabled: true });
  });
  afterAll(async () => {
    await coffer?.close();
    await receiver?.close();
  });

  it('counts requests, bytes, uploads, scans and deliveries, and exposes them on their own port only', async () => {
    const endpoint = receiver.endpoint({ fallback: { status: 204 } });
    const webhook = await project.call('POST', '/webhooks', {
      body: { url: endpoint.url, events: ['file.ready'] },
    });
    expect(webhook.status).toBe(201);

    // A clean upload (initiate, PUT, confirm), scanned ready, then downloaded.
    const clean = await initiate(project, { bytes: CLEAN });
    expect((await put(clean.upload_url, CLEAN)).status).toBe(200);
    expect((await project.call('POST', `/files/${clean.file_id}/confirm`)).status).toBe(200);
    expect(await processUntilSettled(coffer.services.db, clean.file_id, coffer.services.pipeline)).toBe(
      'ready',
    );
    const link = await project.call('GET', `/files/${clean.file_id}/download`);
    const download = await fetch(link.body.url);
    expect(Buffer.from(await download.arrayBuffer()).equals(CLEAN)).toBe(true);

    // A file the scanner rejects.
    const eicar = eicarTestFile();
    const infected = await initiate(project, { bytes: eicar, filename: 'eicar.txt' });
    expect((await put(infected.upload_url, eicar)).status).toBe(200);
    expect((await project.call('POST', `/files/${infected.file_id}/confirm`)).status).toBe(200);
    expect(await processUntilSettled(coffer.services.db, infected.file_id, coffer.services.pipeline)).toBe(
      'quarantined',
    );

    // Failing requests: an unknown file, an unknown route holding a file id, a tampered URL.
    expect((await project.call('GET', '/files/file_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status).toBe(404);
    expect((await coffer.call('GET', `/nowhere/${clean.file_id}`)).status).toBe(404);
    expect((await fetch(`${link.body.url}x`)).status).toBe(403);

    // The file.ready delivery.
    for (let pass = 0; pass < 50 && endpoint.requests.length === 0; pass++) {
      await coffer.services.dispatcher.runOnce();
      await coffer.services.dispatcher.settle();
    }
    expect(endpoint.requests).toHaveLength(1);

    // The API port does not serve the metrics.
    expect((await coffer.call('GET', '/metrics')).status).toBe(404);

    const { text, metrics } = await scrape(metricsPort);

    expectType(metrics, 'coffer_http_request_duration_seconds', 'histogram');
    const requests = (labels: Record<string, string>) =>
      series(metrics, 'coffer_http_request_duration_seconds_count', labels);
    const initiated = { method: 'POST', route: '/v1/projects/:project_id/files/upload', status_code: '201' };
    expect(value(metrics, 'coffer_http_request_duration_seconds_count', initiated)).toBe(2);
    expect(value(metrics, 'coffer_http_request_duration_seconds_bucket', { ...initiated, le: '+Inf' })).toBe(
      2,
    );
    const notFound = requests({ status_code: '404' }).map((s) => s.labels.route);
    expect(notFound).toEqual(
      expect.arrayContaining(['/v1/projects/:project_id/files/:file_id', 'unmatched']),
    );

    expectType(metrics, 'coffer_local_store_bytes_total', 'counter');
    if (storage === 'local') {
      expect(requests({ method: 'PUT', route: '/objects/*', status_code: '200' })).toHaveLength(1);
      expect(requests({ method: 'GET', route: '/objects/*', status_code: '403' })).toHaveLength(1);
      const bytes = (direction: string) => value(metrics, 'coffer_local_store_bytes_total', { direction });
      expect(bytes('upload')).toBe(CLEAN.length + eicar.length);
      expect(bytes('download')).toBe(CLEAN.length);
    }

    expectType(metrics, 'coffer_uploads_total', 'counter');
    expect(value(metrics, 'coffer_uploads_total', { outcome: 'initiated' })).toBe(2);
    expect(value(metrics, 'coffer_uploads_total', { outcome: 'completed' })).toBe(2);

    expectType(metrics, 'coffer_scan_verdicts_total', 'counter');
    expect(value(metrics, 'coffer_scan_verdicts_total', { verdict: 'ready' })).toBeGreaterThanOrEqual(1);
    expect(value(metrics, 'coffer_scan_verdicts_total', { verdict: 'quarantined' })).toBeGreaterThanOrEqual(
      1,
    );
    expectType(metrics, 'coffer_scan_duration_seconds', 'histogram');
    expect(value(metrics, 'coffer_scan_duration_seconds_count')).toBeGreaterThanOrEqual(2);

    expectType(metrics, 'coffer_webhook_deliveries_total', 'counter');
    expect(
      value(metrics, 'coffer_webhook_deliveries_total', { outcome: 'delivered' }),
    ).toBeGreaterThanOrEqual(1);

    expectType(metrics, 'coffer_files', 'gauge');
    const files = (status: string) => value(metrics, 'coffer_files', { project_id: project.id, status });
    expect([files('ready'), files('quarantined'), files('uploading'), files('deleted')]).toEqual([
      1, 1, 0, 0,
    ]);
    expectType(metrics, 'coffer_file_bytes', 'gauge');
    expect(value(metrics, 'coffer_file_bytes', { project_id: project.id, status: 'ready' })).toBe(
      CLEAN.length,
    );

    for (const gauge of ['coffer_job_queue_depth', 'coffer_job_queue_oldest_age_seconds']) {
      expectType(metrics, gauge, 'gauge');
      expect(value(metrics, gauge, { kind: 'scan' })).toBeGreaterThanOrEqual(0);
    }
    for (const gauge of ['coffer_webhook_queue_depth', 'coffer_webhook_queue_oldest_age_seconds']) {
      expectType(metrics, gauge, 'gauge');
      expect(value(metrics, gauge)).toBeGreaterThanOrEqual(0);
    }

    for (const check of ['database', 'cache', 'store'])
      expect(value(metrics, 'coffer_ready', { check })).toBe(1);
    expect(value(metrics, 'coffer_db_pool_max_connections')).toBe(backend === 'postgres' ? 20 : 1);
    expect(value(metrics, 'coffer_db_pool_open_connections')).toBeGreaterThanOrEqual(1);
    if (backend === 'postgres')
      expect(value(metrics, 'coffer_db_pool_waiting_queries')).toBeGreaterThanOrEqual(0);

    expectType(metrics, 'nodejs_eventloop_lag_seconds', 'gauge');
    expectType(metrics, 'process_cpu_user_seconds_total', 'counter');
    expectType(metrics, 'process_resident_memory_bytes', 'gauge');

    // No label holds an id (but a project's), a raw path or a query string; no secret is anywhere.
    for (const { name, labels } of metrics.samples) {
      for (const [label, text] of Object.entries(labels)) {
        if (label === 'project_id') continue;
        expect(text, `${name}{${label}}`).not.toMatch(ID);
        expect(text, `${name}{${label}}`).not.toMatch(/[?&=]|\/objects\/[^*]/);
      }
    }
    const upload = new URL(clean.upload_url);
    for (const secret of [
      project.key,
      ADMIN_KEY,
      clean.file_id,
      infected.file_id,
      upload.pathname,
      upload.search,
      new URL(link.body.url).search,
      endpoint.secret ?? webhook.body.signing_secret,
    ]) {
      expect(text).not.toContain(secret);
    }
  });

  it('answers only GET /metrics on the metrics port', async () => {
    const other = await fetch(`http://127.0.0.1:${metricsPort}/v1/organizations`);
    expect(other.status).toBe(404);
    const post = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  it('is off by default, and never on the API port', async () => {
    expect(loadConfig({}).metrics).toBeUndefined();
    const plain = await startCoffer();
    try {
      expect(plain.config.metrics).toBeUndefined();
      expect(plain.services.metrics).toBeUndefined();
      expect((await plain.call('GET', '/metrics')).status).toBe(404);
    } finally {
      await plain.close();
    }
  });

  it('binds loopback unless told otherwise, and refuses a bad port or the API port', () => {
    expect(loadConfig({ COFFER_METRICS_PORT: '9464' }).metrics).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(loadConfig({ COFFER_METRICS_PORT: '9464', COFFER_METRICS_HOST: '0.0.0.0' }).metrics).toEqual({
      host: '0.0.0.0',
      port: 9464,
    });
    expect(() => loadConfig({ COFFER_METRICS_PORT: 'abc' })).toThrow(ConfigError);
    expect(() => loadConfig({ COFFER_METRICS_PORT: '0' })).toThrow(/COFFER_METRICS_PORT/);
    expect(() => loadConfig({ PORT: '9464', COFFER_METRICS_PORT: '9464' })).toThrow(/other than PORT/);
  });
});

// A process of its own, on its own embedded database: run once, not again on each backend.
describe.skipIf(backend !== 'embedded')('coffer worker', () => {
  afterAll(() => stopAll());

  it('serves the metrics too when COFFER_METRICS_PORT is set', async () => {
    const port = await freePort();
    startProcess('worker', 'worker', {
      PORT: String(await freePort()),
      COFFER_DATA_DIR: mkdtempSync(join(tmpdir(), 'coffer-metrics-worker-')),
      COFFER_ADMIN_KEY: ADMIN_KEY,
      COFFER_METRICS_PORT: String(port),
    });
    // A fresh embedded database is migrated first: that may take a while on a busy machine.
    const text = await until(
      'the worker to serve /metrics',
      async () => {
        const response = await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => undefined);
        return response?.status === 200 ? response.text() : undefined;
      },
      90_000,
    );
    const metrics = parseExposition(text);
    expect(value(metrics, 'coffer_ready', { check: 'database' })).toBe(1);
    expect(value(metrics, 'coffer_job_queue_depth', { kind: 'scan' })).toBe(0);
    expectType(metrics, 'process_cpu_user_seconds_total', 'counter');
    // No API in this process: the request histogram is declared, without a series.
    expect(series(metrics, 'coffer_http_request_duration_seconds_count')).toEqual([]);
  }, 120_000);
});
