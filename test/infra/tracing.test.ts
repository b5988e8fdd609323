import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPostgres, quoteIdent } from '../../src/infra/db.ts';
import { EVENT_TYPES } from '../../src/modules/events/types.ts';
import { SCOPES } from '../../src/modules/projects/schemas.ts';
import { backend, namespace, s3TestSettings, storage, testStorageEnv } from '../support/backends.ts';
import { ADMIN_KEY, expectStatus, request } from '../support/coffer.ts';
import { freePort } from '../support/net.ts';
import { type ExportedSpan, type OtlpReceiver, startOtlpReceiver } from '../support/otlp.ts';
import { type CofferProcess, ready, startProcess, stopAll, until } from '../support/processes.ts';
import { type Endpoint, type Receiver, startReceiver } from '../support/receiver.ts';

// A serve and a worker share the database and the objects: PostgreSQL (the embedded database is one
// process's), with both processes on one data dir's local store, or on the test's S3 bucket.
const enabled = backend === 'postgres';
if (!enabled) {
  process.stderr.write(
    'test/infra/tracing.test.ts is skipped: it needs PostgreSQL (vitest projects postgres and s3)\n',
  );
}

let db: Db;
let schema: string;
let tempDir: string;
let otlp: OtlpReceiver;
let receiver: Receiver;
let endpoint: Endpoint;
let serve: CofferProcess;
let worker: CofferProcess;

/** The trace a client begins and sends along with each of its requests (W3C traceparent). */
const traceId = randomBytes(16).toString('hex');
const traceparent = `00-${traceId}-${randomBytes(8).toString('hex')}-01`;

const inTrace = () => otlp.spans.filter((span) => span.traceId === traceId);
const named = (name: string) => inTrace().filter((span) => span.name === name);
const by = (command: string) => (span: ExportedSpan) => span.resource['coffer.command'] === command;

describe.skipIf(!enabled)('traces of an upload across a serve and a worker (OTLP/HTTP)', () => {
  let projectId: string;
  let apiKey: string;
  let fileId: string;
  let uploadUrl: string;
  const bytes = Buffer.from(`traced file\n${randomBytes(600).toString('base64')}\n`);

  beforeAll(async () => {
    schema = `${namespace()}_tracing`;
    const url = new URL(process.env.COFFER_TEST_DATABASE_URL!);
    db = await openPostgres(url.toString(), { schema });
    url.searchParams.set('options', `-c search_path=${schema},public`);
    tempDir = mkdtempSync(join(tmpdir(), 'coffer-tracing-'));
    otlp = await startOtlpReceiver();
    receiver = await startReceiver();
    const caFile = join(tempDir, 'receiver-ca.pem');
    writeFileSync(caFile, receiver.ca);
    const env = async () => ({
      ...testStorageEnv(),
      COFFER_DATABASE_URL: url.toString(),
      ...(process.env.COFFER_TEST_REDIS_URL ? { COFFER_REDIS_URL: process.env.COFFER_TEST_REDIS_URL } : {}),
      COFFER_DATA_DIR: join(tempDir, 'data'),
      COFFER_ADMIN_KEY: ADMIN_KEY,
      COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      COFFER_JOB_LEASE_SECONDS: '1',
      COFFER_LOG_LEVEL: 'info',
      NODE_EXTRA_CA_CERTS: caFile,
      PORT: String(await freePort()),
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_SERVICE_NAME: 'coffer-test',
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    // The serve's scanner is unreachable: its scans fail (and are retried later), so only the worker's
    // scanner can give the verdict.
    serve = startProcess('serve', 'serve', {
      ...(await env()),
      COFFER_CLAMD_URL: `tcp://127.0.0.1:${await freePort()}`,
    });
    worker = startProcess('worker', 'worker', await env());
    await ready(serve);
    await until(
      'the worker to start',
      () => worker.logs.some((line) => line.msg === 'workers started'),
      45_000,
    );

    const org = await request(`${serve.url}/v1/organizations`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'T' },
    });
    expectStatus(org, 201);
    const project = await request(`${serve.url}/v1/organizations/${org.body.id}/projects`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'T', settings: { virus_scan_enabled: true } },
    });
    expectStatus(project, 201);
    projectId = project.body.id;
    const key = await request(`${serve.url}/v1/projects/${projectId}/api-keys`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'tracing', scopes: SCOPES },
    });
    expectStatus(key, 201);
    apiKey = key.body.key;
    endpoint = receiver.endpoint();
    const webhook = await request(`${serve.url}/v1/projects/${projectId}/webhooks`, 'POST', {
      token: apiKey,
      body: { url: endpoint.url, events: EVENT_TYPES },
    });
    expectStatus(webhook, 201);
    endpoint.secret = webhook.body.signing_secret;
  }, 120_000);

  afterAll(async () => {
    serve?.child.kill('SIGCONT');
    await stopAll();
    await receiver?.close();
    await otlp?.close();
    if (db) {
      await db.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`);
      await db.close();
    }
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  });

  it('makes one trace of the initiate, the PUT, the confirm, the scan and the deliveries', async () => {
    const headers = { traceparent };
    const started = await request(`${serve.url}/v1/projects/${projectId}/files/upload`, 'POST', {
      token: apiKey,
      headers,
      body: { filename: 'traced.txt', content_type: 'text/plain', size_bytes: bytes.length },
    });
    expectStatus(started, 201);
    fileId = started.body.file_id;
    uploadUrl = started.body.upload_url;
    const stored = await fetch(uploadUrl, {
      method: 'PUT',
      body: bytes,
      headers: { 'content-type': 'text/plain', traceparent },
    });
    expect(stored.status, await stored.text()).toBe(200);
    const confirmed = await request(`${serve.url}/v1/projects/${projectId}/files/${fileId}/confirm`, 'POST', {
      token: apiKey,
      headers,
    });
    expectStatus(confirmed, 200);

    // The serve is paused, so that its failed scans are not retried before the worker's: a scan it
    // claimed just before fails at once (then waits its backoff), or comes back to the worker after
    // its one-second lease.
    serve.child.kill('SIGSTOP');
    const [first, second] = await endpoint.waitFor(2, 45_000);
    serve.child.kill('SIGCONT');
    expect([first!.json.event, second!.json.event].sort()).toEqual(['file.ready', 'file.uploaded']);
    // Every delivery request carries the upload's trace.
    for (const delivery of [first!, second!]) {
      expect(delivery.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    }

    await until('the spans of the upload, the scan and the deliveries', () => {
      const spans = inTrace();
      return (
        spans.some((span) => span.name === 'POST /v1/projects/:project_id/files/:file_id/confirm') &&
        spans.some((span) => span.name === 'jobs scan' && by('worker')(span)) &&
        spans.filter((span) => span.name === 'deliveries deliver').length >= 2
      );
    });
    const initiate = named('POST /v1/projects/:project_id/files/upload');
    expect(initiate).toHaveLength(1);
    expect(initiate[0]!.attributes['http.route']).toBe('/v1/projects/:project_id/files/upload');
    expect(initiate[0]!.kind).toBe(2);
    // The PUT is Coffer's on the local store; on S3 it goes to the bucket, and the confirm's seal asks S3.
    expect(named('PUT /objects/*')).toHaveLength(storage === 'local' ? 1 : 0);
    const confirms = named('POST /v1/projects/:project_id/files/:file_id/confirm');
    expect(confirms).toHaveLength(1);
    for (const span of [...initiate, ...named('PUT /objects/*'), ...confirms])
      expect(by('serve')(span)).toBe(true);

    // The scan ran in the worker, as a child of the trace, and read the object and scanned it there.
    const scans = named('jobs scan').filter((span) => span.status !== 2);
    expect(scans).toHaveLength(1);
    const scan = scans[0]!;
    expect(by('worker')(scan)).toBe(true);
    expect(scan.attributes['coffer.file_id']).toBe(fileId);
    expect(scan.attributes['coffer.project_id']).toBe(projectId);
    const childrenOf = (parent: ExportedSpan) =>
      inTrace().filter((span) => span.parentSpanId === parent.spanId);
    const under = (parent: ExportedSpan): ExportedSpan[] =>
      childrenOf(parent).flatMap((child) => [child, ...under(child)]);
    const scanWork = under(scan).map((span) => span.name);
    expect(scanWork).toContain('scanner.scan');
    expect(scanWork).toContain('store.read');
    if (storage === 's3') {
      expect(scanWork).toContain('S3.GetObject');
      const seal = named('store.seal');
      expect(seal.length).toBeGreaterThan(0);
      expect(under(seal[0]!).some((span) => span.name.startsWith('S3.') && span.kind === 3)).toBe(true);
    }
    expect(under(scan).some((span) => span.attributes['db.query.text'] !== undefined)).toBe(true);

    // Each delivery attempt: a job span with the webhook request as its client span.
    const deliveries = named('deliveries deliver');
    expect(deliveries.length).toBeGreaterThanOrEqual(2);
    for (const delivery of deliveries) {
      expect(childrenOf(delivery).some((span) => span.kind === 3 && span.name === 'POST')).toBe(true);
    }
    // The database's statements carry no values: only their text, with parameters.
    const statements = inTrace().filter((span) => span.attributes['db.query.text'] !== undefined);
    expect(statements.length).toBeGreaterThan(0);
    expect(statements.every((span) => span.resource['service.name'] === 'coffer-test')).toBe(true);

    // The log lines of the request carry its trace.
    expect(serve.logs.some((line) => line.trace_id === traceId && typeof line.span_id === 'string')).toBe(
      true,
    );
  });

  it('puts no secret, no presigned signature and no content in any span', async () => {
    const spans = otlp.spans;
    expect(spans.length).toBeGreaterThan(0);
    expect(otlp.rejected).toEqual([]);
    const text = JSON.stringify(spans);
    expect(text).not.toContain(apiKey);
    expect(text).not.toContain(ADMIN_KEY);
    const s3Secret = s3TestSettings()?.secretAccessKey;
    if (storage === 's3') expect(text).not.toContain(s3Secret);
    expect(text).not.toContain(endpoint.secret!);
    const query = new URL(uploadUrl).searchParams;
    const signature = query.get('sig') ?? query.get('X-Amz-Signature');
    expect(signature).toBeTruthy();
    expect(text).not.toContain(signature!);
    expect(text).not.toMatch(/sig=|signature=|X-Amz-Signature|expires=/i);
    expect(text.toLowerCase()).not.toContain('authorization');
    expect(text).not.toContain(bytes.toString('utf8').slice(12, 60));
    // Health probes (the readiness polls of the start) make no trace.
    expect(spans.filter((span) => span.name.startsWith('GET /health/'))).toEqual([]);
    // Ids appear as attributes, never in a span's name.
    for (const span of spans) {
      expect(span.name).not.toContain(fileId);
      expect(span.name).not.toContain(projectId);
    }
  });
});
