import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPglite } from '../../src/infra/db.ts';
import type { Failpoint } from '../../src/lib/failpoints.ts';
import { backend } from '../support/backends.ts';
import { ADMIN_KEY, expectStatus, type Reply } from '../support/coffer.ts';
import { put, sha256 } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import {
  type CofferProcess,
  exitOf,
  kill,
  ready,
  startProcess,
  stopAll,
  until,
} from '../support/processes.ts';
import { type Endpoint, type Receiver, startReceiver } from '../support/receiver.ts';
import {
  expectEventsDelivered,
  expectNothingLeft,
  expectReadyBytes,
  newProject,
  type ProjectApi,
  servedKeys,
} from './invariants.ts';

/**
 * `coffer serve` killed with SIGKILL (a failpoint: COFFER_FAILPOINTS) at each step of a single upload,
 * a multipart upload, a version replacement, a scan and a webhook delivery, then started again on the
 * same data: each step recovers (by the client's retry, or by itself within about a job lease), and
 * in the end no file is ready with other bytes than uploaded, every event was delivered under one
 * event id, no job is left, and collection leaves only the live objects on disk.
 *
 * The processes keep the embedded database and the local store in their own data dir: nothing here
 * depends on the test backend, so one pass (the embedded one) is enough.
 */
const enabled = backend === 'embedded';

const LEASE_SECONDS = 2;
/** Long enough for an upload cut by a crash to be confirmed after the restart; then collected. */
const UPLOAD_URL_TTL_SECONDS = 30;
const KiB = 1024;
const MiB = 1024 * KiB;

let dataDir: string;
let objects: string;
let receiver: Receiver;
let endpoint: Endpoint;
let env: Record<string, string>;
/** The same port on every start: URLs issued before a crash are used after it. */
let baseUrl: string;
let node: CofferProcess | undefined;

/** Starts `coffer serve` on the data dir, crashing at `failpoint` when given. */
async function serve(name: string, failpoint?: Failpoint): Promise<CofferProcess> {
  const started = startProcess(name, 'serve', { ...env, COFFER_FAILPOINTS: failpoint ?? '' });
  await ready(started);
  node = started;
  return started;
}

/** The request was cut by the crash, and the process died of its failpoint. */
async function expectCrash(reply: Promise<Reply> | undefined): Promise<void> {
  if (reply) await expect(reply).rejects.toThrow();
  expect(await exitOf(node!)).toBe('SIGKILL');
  node = undefined;
}

beforeAll(async () => {
  if (!enabled) return;
  dataDir = mkdtempSync(join(tmpdir(), 'coffer-crash-steps-'));
  objects = join(dataDir, 'objects');
  receiver = await startReceiver();
  endpoint = receiver.endpoint();
  const caFile = join(dataDir, 'receiver-ca.pem');
  writeFileSync(caFile, receiver.ca);
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  env = {
    PORT: String(port),
    COFFER_PUBLIC_URL: baseUrl,
    COFFER_DATA_DIR: dataDir,
    COFFER_ADMIN_KEY: ADMIN_KEY,
    COFFER_LOG_LEVEL: 'info',
    COFFER_JOB_LEASE_SECONDS: String(LEASE_SECONDS),
    COFFER_UPLOAD_URL_TTL_SECONDS: String(UPLOAD_URL_TTL_SECONDS),
    COFFER_GC_GRACE_SECONDS: '1',
    COFFER_GC_INTERVAL_SECONDS: '1',
    COFFER_WEBHOOK_RETRY_SCHEDULE: '0,1,1,1,1',
    COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    NODE_EXTRA_CA_CERTS: caFile,
  };
});

afterAll(async () => {
  await stopAll();
  await receiver?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe.skipIf(!enabled)('coffer serve killed at each step, then restarted', () => {
  let api: ProjectApi;
  let webhookId: string;
  /** The bytes each file must serve once ready (a replaced content: its new bytes). */
  const uploaded = new Map<string, Buffer>();
  /** The events each file must have fired, as [file_id, event]. */
  const events: [string, string][] = [];
  const ids: Record<string, string> = {};
  const urls: Record<string, string> = {};

  const initiate = async (name: string, bytes: Buffer) => {
    const reply = await api('POST', '/files/upload', {
      filename: `${name}.bin`,
      content_type: 'application/octet-stream',
      size_bytes: bytes.length,
    });
    expectStatus(reply, 201);
    ids[name] = reply.body.file_id;
    urls[name] = reply.body.upload_url;
    events.push([reply.body.file_id, 'file.uploaded']);
  };
  const store = async (url: string, bytes: Buffer) => {
    const stored = await put(url, bytes, 'application/octet-stream');
    expect(stored.status, stored.text).toBe(200);
    return stored.headers.get('etag')!;
  };
  const statusOf = async (name: string) => {
    const reply = await api('GET', `/files/${ids[name]}`);
    expectStatus(reply, 200);
    return reply.body.status as string;
  };
  const confirm = (name: string) => api('POST', `/files/${ids[name]}/confirm`);

  const bytes = {
    single: randomBytes(64 * KiB),
    /** Stored, never confirmed: abandoned, then collected. */
    abandoned: randomBytes(32 * KiB),
    committed: randomBytes(48 * KiB),
    parts: [randomBytes(5 * MiB), randomBytes(100 * KiB)],
    replacement: randomBytes(80 * KiB),
    /** New content never confirmed: collected. */
    abandonedReplacement: randomBytes(16 * KiB),
    scanned: randomBytes(40 * KiB),
  };

  // Each process is armed with the next step's failpoint while the previous step recovers: the
  // retried operations never cross the failpoint they recover from.
  it('webhook delivery, killed once the receiver answered 2xx: sent again after the restart, under the same event id', async () => {
    await serve('serve 1', 'webhook.delivery.sent');
    ({ api, webhookId } = await newProject(() => baseUrl, ADMIN_KEY, endpoint, { versioning_enabled: true }));
    // Its bytes come after the restart, and it is never confirmed: abandoned, then collected.
    await initiate('abandoned', bytes.abandoned);
    await expectCrash(undefined);
    expect(endpoint.requests).toHaveLength(1);

    await serve('serve 2', 'multipart.complete.assembled');
    const [first, second] = await endpoint.waitFor(2, 30_000);
    expect(second!.headers['x-coffer-event-id']).toBe(first!.headers['x-coffer-event-id']);
    expect(second!.raw.equals(first!.raw)).toBe(true);
  });

  it('multipart upload, killed once the store assembled it: the file becomes ready by itself within about a lease', async () => {
    await store(urls.abandoned!, bytes.abandoned);
    const total = bytes.parts.reduce((sum, part) => sum + part.length, 0);
    const session = await api('POST', '/files/upload/multipart/start', {
      filename: 'parts.bin',
      content_type: 'application/octet-stream',
      total_size_bytes: total,
    });
    expectStatus(session, 201);
    ids.parts = session.body.file_id;
    events.push([ids.parts!, 'file.uploaded']);
    const path = `/files/upload/multipart/${session.body.upload_id}`;
    const parts = [];
    for (const [index, part] of bytes.parts.entries()) {
      const url = await api('GET', `${path}/part-url?part=${index + 1}&size=${part.length}`);
      expectStatus(url, 200);
      parts.push({ part_number: index + 1, etag: await store(url.body.url, part) });
    }
    await expectCrash(api('POST', `${path}/complete`, { parts }));

    await serve('serve 3', 'upload.confirm.sealed');
    // The session was left completing: the reaper settles it once its claim is older than a lease.
    await until('the assembled upload to be recovered', async () => (await statusOf('parts')) === 'ready');
    const again = await api('POST', `${path}/complete`, { parts });
    expectStatus(again, 409);
    expect(again.body.error).toMatchObject({ code: 'INVALID_STATE', details: { status: 'completed' } });
    uploaded.set(ids.parts!, Buffer.concat(bytes.parts));
    events.push([ids.parts!, 'file.ready']);
  });

  it('single upload, killed once its object is sealed: the file stays uploading, and a retried confirm makes it ready', async () => {
    await initiate('single', bytes.single);
    await store(urls.single!, bytes.single);
    await expectCrash(confirm('single'));

    await serve('serve 4', 'version.confirm.sealed');
    expect(await statusOf('single')).toBe('uploading');
    const confirmed = await confirm('single');
    expectStatus(confirmed, 200);
    expect(confirmed.body).toMatchObject({ status: 'ready', checksum_sha256: sha256(bytes.single) });
    uploaded.set(ids.single!, bytes.single);
    events.push([ids.single!, 'file.ready']);
  });

  it('version replacement, killed once its object is sealed: the old bytes stay served, and a retried confirm replaces them', async () => {
    const newContent = async (name: string, content: Buffer) => {
      const reply = await api('POST', `/files/${ids[name]}/versions`, {
        size_bytes: content.length,
        content_type: 'application/octet-stream',
      });
      expectStatus(reply, 201);
      await store(reply.body.upload_url, content);
      return reply.body.version_id as string;
    };
    const version = await newContent('single', bytes.replacement);
    await newContent('parts', bytes.abandonedReplacement);
    await expectCrash(api('POST', `/files/${ids.single}/versions/${version}/confirm`));

    await serve('serve 5', 'upload.confirm.committed');
    await expectReadyBytes(api, uploaded); // still the first bytes
    const confirmed = await api('POST', `/files/${ids.single}/versions/${version}/confirm`);
    expectStatus(confirmed, 200);
    expect(confirmed.body.status).toBe('committed');
    uploaded.set(ids.single!, bytes.replacement);
    events.push([ids.single!, 'file.ready']);
  });

  it('single upload, killed once its confirm is committed: the file is ready, and a retried confirm says so', async () => {
    await initiate('committed', bytes.committed);
    await store(urls.committed!, bytes.committed);
    await expectCrash(confirm('committed'));

    await serve('serve 6', 'scan.judged');
    expect(await statusOf('committed')).toBe('ready');
    const again = await confirm('committed');
    expectStatus(again, 409);
    expect(again.body.error).toMatchObject({ code: 'INVALID_STATE', details: { status: 'ready' } });
    uploaded.set(ids.committed!, bytes.committed);
    events.push([ids.committed!, 'file.ready']);
  });

  it('scan, killed between its verdict and the commit of it: scanned again after the restart, within about a lease', async () => {
    expectStatus(await api('PATCH', '', { settings: { virus_scan_enabled: true } }), 200);
    await initiate('scanned', bytes.scanned);
    await store(urls.scanned!, bytes.scanned);
    const processing = await confirm('scanned');
    expectStatus(processing, 200);
    expect(processing.body.status).toBe('processing');
    await expectCrash(undefined);

    await serve('serve 7');
    await until('the scan to be taken up again', async () => (await statusOf('scanned')) === 'ready');
    uploaded.set(ids.scanned!, bytes.scanned);
    events.push([ids.scanned!, 'file.ready']);
  });

  it('leaves no ready file with other bytes, every event delivered under one event id, no job, and nothing else on disk', async () => {
    // The upload never confirmed fails once its URL and the grace period are over; its bytes go.
    await until(
      'the unconfirmed upload to be failed',
      async () => (await statusOf('abandoned')) === 'failed',
      (UPLOAD_URL_TTL_SECONDS + 15) * 1000,
    );
    const files = await expectReadyBytes(api, uploaded);
    expect(
      [...files.values()]
        .filter((f) => f.status === 'ready')
        .map((f) => f.id)
        .sort(),
    ).toEqual([...uploaded.keys()].sort());
    expect(files.get(ids.abandoned!)).toMatchObject({ status: 'failed', failure_reason: 'upload_abandoned' });

    const received = await expectEventsDelivered(api, webhookId, endpoint, events);
    expect(received.size).toBe(events.length);
    // Every file is settled by now: what it serves does not change while collection runs.
    const live = await servedKeys(api);
    await expectNothingLeft(objects, async () => live, (UPLOAD_URL_TTL_SECONDS + 15) * 1000);

    // The outbox and the queues, read from the database once the last process is gone.
    await kill(node!);
    const db = await openPglite(dataDir);
    try {
      expect(await db.query('SELECT kind, file_id FROM jobs')).toEqual([]);
      expect(
        await db.query(
          `SELECT id, status FROM multipart_sessions WHERE status NOT IN ('completed', 'aborted', 'expired')`,
        ),
      ).toEqual([]);
      const outbox = await db.query<{ id: string }>('SELECT id FROM events ORDER BY id');
      expect(outbox.map((event) => event.id)).toEqual([...received.keys()].sort());
      expect(await db.query(`SELECT id, status FROM deliveries WHERE status <> 'delivered'`)).toEqual([]);
    } finally {
      await db.close();
    }
  });
});
