import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPostgres, quoteIdent } from '../../src/infra/db.ts';
import { EVENT_TYPES } from '../../src/modules/events/types.ts';
import { SCOPES } from '../../src/modules/projects/schemas.ts';
import { backend, namespace, storage, testClamdUrl, testStorageEnv } from '../support/backends.ts';
import { ADMIN_KEY, type CallOptions, expectStatus, type Reply, request } from '../support/coffer.ts';
import { put, sha256 } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import { type CofferProcess, ready, sleep, startProcess, stopAll, until } from '../support/processes.ts';
import { type Endpoint, type Receiver, startReceiver } from '../support/receiver.ts';

// Several processes must share the database and the bytes: the embedded database belongs to one
// process, and local stores on two nodes would not see each other's files.
const enabled = backend === 'postgres' && storage === 's3';
if (!enabled) {
  process.stderr.write(
    'test/cli/scale-out.test.ts is skipped: it needs PostgreSQL, Redis and S3 (vitest project s3: COFFER_TEST_BACKEND=postgres, COFFER_TEST_STORAGE=s3)\n',
  );
}

const FILES = 8;
const TOKEN_ATTEMPTS = 12;
const TOKEN_MAX_FILES = 3;
/** Longer than the retry schedule and a few worker intervals: a duplicate sent late would arrive within it. */
const QUIET_MS = 1500;

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

let db: Db;
let schema: string;
let tempDir: string;
let receiver: Receiver;
let endpoint: Endpoint;
let a: CofferProcess;
let b: CofferProcess;
let worker: CofferProcess;
const nodes: CofferProcess[] = [];
const start = (name: string, command: 'serve' | 'worker', env: Record<string, string>) => {
  const node = startProcess(name, command, env);
  nodes.push(node);
  return node;
};
let projectId: string;
let apiKey: string;

/** Calls `/v1/projects/{projectId}{path}` on `node` with the project's key unless another token is given. */
const api = <T = any>(
  node: CofferProcess,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<Reply<T>> =>
  request<T>(`${node.url}/v1/projects/${projectId}${path}`, method, {
    ...options,
    token: options.token ?? apiKey,
  });

describe.skipIf(!enabled)('two coffer serve and one coffer worker on one PostgreSQL, Redis and S3', () => {
  /** Files uploaded (initiated, stored, confirmed) by the first test. */
  const uploaded: { id: string; bytes: Buffer }[] = [];

  beforeAll(async () => {
    schema = `${namespace()}_scale`;
    const url = new URL(process.env.COFFER_TEST_DATABASE_URL!);
    db = await openPostgres(url.toString(), { schema });
    url.searchParams.set('options', `-c search_path=${schema},public`);
    tempDir = mkdtempSync(join(tmpdir(), 'coffer-scale-'));
    receiver = await startReceiver();
    const caFile = join(tempDir, 'receiver-ca.pem');
    writeFileSync(caFile, receiver.ca);
    const clamd = testClamdUrl();
    const shared = {
      ...testStorageEnv(),
      COFFER_DATABASE_URL: url.toString(),
      COFFER_REDIS_URL: process.env.COFFER_TEST_REDIS_URL ?? '',
      COFFER_ADMIN_KEY: ADMIN_KEY,
      COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      COFFER_WEBHOOK_RETRY_SCHEDULE: '0,0.2,0.2,0.2,0.2',
      COFFER_LOG_LEVEL: 'info',
      NODE_EXTRA_CA_CERTS: caFile,
      ...(clamd ? { COFFER_CLAMD_URL: clamd } : {}),
    };
    // A data directory each: nothing but the database, Redis and the bucket is shared.
    const own = async (name: string) => ({
      ...shared,
      COFFER_DATA_DIR: mkdtempSync(join(tempDir, `${name}-`)),
      PORT: String(await freePort()),
    });
    // All three at once: the migrations run under an advisory lock.
    a = start('serve A', 'serve', await own('a'));
    b = start('serve B', 'serve', await own('b'));
    worker = start('worker', 'worker', await own('w'));
    for (const node of [a, b]) await ready(node);
    await until(
      'the worker to start',
      () => worker.logs.some((line) => line.msg === 'workers started'),
      45_000,
    );

    const org = await request(`${a.url}/v1/organizations`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'Scale' },
    });
    expectStatus(org, 201);
    const project = await request(`${a.url}/v1/organizations/${org.body.id}/projects`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'Scale', settings: { virus_scan_enabled: true } },
    });
    expectStatus(project, 201);
    projectId = project.body.id;
    const key = await request(`${a.url}/v1/projects/${projectId}/api-keys`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'scale', scopes: SCOPES },
    });
    expectStatus(key, 201);
    apiKey = key.body.key;
    // Registered on B, before any upload: every event of the tests has a delivery.
    endpoint = receiver.endpoint();
    const webhook = await api(b, 'POST', '/webhooks', { body: { url: endpoint.url, events: EVENT_TYPES } });
    expectStatus(webhook, 201);
    endpoint.secret = webhook.body.signing_secret;
  }, 120_000);

  afterAll(async () => {
    await stopAll();
    await receiver?.close();
    if (db) {
      await db.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`);
      await db.close();
    }
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  });

  it('downloads from one node what was uploaded and confirmed through the other', async () => {
    await Promise.all(
      range(FILES).map(async (i) => {
        const [first, second] = i % 2 === 0 ? [a, b] : [b, a];
        // Distinct bytes of distinct sizes, text so that the type check passes.
        const bytes = Buffer.from(`file ${i}\n${randomBytes(1500 * (i + 1)).toString('base64')}\n`);
        const started = await api(first, 'POST', '/files/upload', {
          body: { filename: `file-${i}.txt`, content_type: 'text/plain', size_bytes: bytes.length },
        });
        expectStatus(started, 201);
        const id: string = started.body.file_id;
        const stored = await put(started.body.upload_url, bytes, 'text/plain');
        expect(stored.status, stored.text).toBe(200);
        const confirmed = await api(second, 'POST', `/files/${id}/confirm`);
        expectStatus(confirmed, 200);
        expect(confirmed.body.status).toBe('processing');
        uploaded.push({ id, bytes });

        const file = await until(`${id} to be ready`, async () => {
          const reply = await api(second, 'GET', `/files/${id}`);
          if (reply.status === 200 && reply.body.status === 'processing') return undefined;
          return reply;
        });
        expectStatus(file, 200);
        expect(file.body.status, JSON.stringify(file.body)).toBe('ready');
        // Scanned: the checksum is computed during the scan, before the file becomes ready.
        expect(file.body.checksum_sha256).toBe(sha256(bytes));

        const link = await api(first, 'GET', `/files/${id}/download`);
        expectStatus(link, 200);
        const download = await fetch(link.body.url);
        expect(download.status).toBe(200);
        expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);
      }),
    );
    expect(uploaded).toHaveLength(FILES);
  });

  it("counts an upload token's max_files once across both nodes", async () => {
    const created = await api(a, 'POST', '/upload-tokens', { body: { max_files: TOKEN_MAX_FILES } });
    expectStatus(created, 201);
    const replies = await Promise.all(
      range(TOKEN_ATTEMPTS).map((i) =>
        api(i % 2 === 0 ? a : b, 'POST', '/files/upload', {
          token: created.body.token,
          body: { filename: `token-${i}.txt`, content_type: 'text/plain', size_bytes: 10 },
        }),
      ),
    );
    const accepted = replies.filter((reply) => reply.status === 201);
    const refused = replies.filter((reply) => reply.status !== 201);
    expect(accepted).toHaveLength(TOKEN_MAX_FILES);
    expect(refused).toHaveLength(TOKEN_ATTEMPTS - TOKEN_MAX_FILES);
    for (const reply of refused) {
      expectStatus(reply, 403);
      expect(reply.body.error.code).toBe('TOKEN_LIMIT_REACHED');
    }
    const [token] = await db.query<{ files_used: number }>(
      'SELECT files_used FROM upload_tokens WHERE project_id = $1',
      [projectId],
    );
    expect(token!.files_used).toBe(TOKEN_MAX_FILES);
  });

  it('delivers every event exactly once, signed', async () => {
    // Read here rather than kept by the token test, so that a failure there does not cascade.
    const tokenFiles = await db.query<{ id: string }>(
      'SELECT id FROM files WHERE project_id = $1 AND upload_token_id IS NOT NULL',
      [projectId],
    );
    // What the uploads caused: file.uploaded at initiate (token files too), file.ready after the scan.
    const expected = [
      ...uploaded.flatMap(({ id }) => [`file.uploaded ${id}`, `file.ready ${id}`]),
      ...tokenFiles.map(({ id }) => `file.uploaded ${id}`),
    ].sort();
    await endpoint.waitFor(expected.length, 30_000);
    await sleep(QUIET_MS);
    const received = endpoint.requests;
    const eventIds = received.map((r) => r.headers['x-coffer-event-id'] as string);
    expect(new Set(eventIds).size, 'an event id arrived more than once').toBe(received.length);
    for (const r of received) {
      expect(r.signatureValid).toBe(true);
      expect(r.headers['x-coffer-event']).toBe(r.json.event);
    }
    expect(received.map((r) => `${r.json.event} ${r.json.data.file_id}`).sort()).toEqual(expected);
    // Every event recorded is one that arrived, and each delivery took one attempt.
    const events = await db.query<{ id: string }>('SELECT id FROM events WHERE project_id = $1', [projectId]);
    expect(events.map((e) => e.id).sort()).toEqual([...eventIds].sort());
    const deliveries = await db.query<{ status: string; attempts: number }>(
      'SELECT status, attempts FROM deliveries WHERE project_id = $1',
      [projectId],
    );
    expect(deliveries).toHaveLength(expected.length);
    expect(deliveries.every((d) => d.status === 'delivered' && d.attempts === 1)).toBe(true);
  });

  it('has each scan judged by exactly one process, taking the file from processing to ready once', async () => {
    const verdicts = (fileId: string) =>
      nodes.flatMap((node) =>
        node.logs
          .filter((line) => line.msg === 'file processed' && line.file_id === fileId)
          .map((line) => ({ by: node.name, status: line.status })),
      );
    // The log line follows the commit that made the file ready: it may trail the API a little.
    await until('a verdict logged for every file', () => uploaded.every(({ id }) => verdicts(id).length > 0));
    await sleep(QUIET_MS);
    for (const { id } of uploaded) {
      expect(verdicts(id), id).toEqual([{ by: expect.any(String), status: 'ready' }]);
    }
    const ids = uploaded.map(({ id }) => id);
    const events = await db.query<{ file_id: string; type: string }>(
      'SELECT file_id, type FROM events WHERE file_id = ANY ($1::text[]) ORDER BY created_at, id',
      [ids],
    );
    for (const id of ids) {
      expect(events.filter((e) => e.file_id === id).map((e) => e.type)).toEqual([
        'file.uploaded',
        'file.ready',
      ]);
    }
    const jobs = await db.query('SELECT id FROM jobs WHERE file_id = ANY ($1::text[])', [ids]);
    expect(jobs).toEqual([]);
  });
});
