import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/infra/db.ts';
import { JOBS, queueDepth } from '../../src/infra/jobs/index.ts';
import type { Scanner } from '../../src/infra/scanner/index.ts';
import type { PipelineOptions } from '../../src/modules/pipeline/service.ts';
import { backend, namespace, secondDb, testStorageEnv } from '../support/backends.ts';
import { ADMIN_KEY, keyWith, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { startFakeClamd } from '../support/fake-clamd.ts';
import { initiate, upload } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import { drain, eventTypes, PNG, pipelineWith, processUntilSettled } from '../support/pipeline.ts';
import { kill, sleep, startProcess, stopAll, until } from '../support/processes.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(async () => {
  await stopAll();
  await coffer?.close();
});

/** A pipeline of its own whose job leases last a second. */
const leased = (scanner: Scanner, options: Partial<PipelineOptions> = {}, db = coffer.services.db) =>
  pipelineWith(coffer, scanner, { leaseSeconds: 1, ...options }, db);

/** Reads every byte and finds nothing; counts the scans. */
function cleanScanner(): Scanner & { scans: number } {
  return {
    name: 'clean',
    scans: 0,
    async scan(stream) {
      this.scans++;
      for await (const _ of stream);
      return { clean: true };
    },
    ping: async () => {},
  };
}

/** Takes the stream and never answers: a scan that would run forever, until its stream is destroyed. */
function hangingScanner(): Scanner & { started: Promise<void>; stopped: Promise<Error> } {
  let start: () => void = () => {};
  let stop: (error: Error) => void = () => {};
  const started = new Promise<void>((resolve) => {
    start = resolve;
  });
  const stopped = new Promise<Error>((resolve) => {
    stop = resolve;
  });
  return {
    name: 'hanging',
    started,
    stopped,
    scan: (stream: Readable) =>
      new Promise((_, reject) => {
        start();
        stream.once('close', () => {
          const error = stream.errored ?? new Error('the stream closed');
          stop(error);
          reject(error);
        });
      }),
    ping: async () => {},
  };
}

/** `db` as seen by a worker whose connection can be cut: after cut(), every statement fails. */
function severable(db: Db): { db: Db; cut(): void } {
  let cut = false;
  const lost = () => Promise.reject(new Error('connection to the database lost'));
  const statements = new Set<PropertyKey>(['query', 'exec', 'tx', 'ping']);
  return {
    db: new Proxy(db, {
      get: (target, name, receiver) =>
        cut && statements.has(name) ? lost : Reflect.get(target, name, receiver),
    }),
    cut() {
      cut = true;
    },
  };
}

const jobsOf = (fileId: string) =>
  coffer.services.db.query<{
    kind: string;
    attempts: number;
    lease_token: string | null;
    last_error: string;
  }>('SELECT kind, attempts, lease_token, last_error FROM jobs WHERE file_id = $1', [fileId]);

/** A file left `processing` with its scan job due and no other job due before it. */
async function processingFile(project: TestProject): Promise<string> {
  // Jobs left by earlier tests share the database: done first, so that the next claim takes this one.
  await drain(leased(cleanScanner()));
  // and those not due yet (backing off, or leased by a worker gone with its test) are parked.
  await coffer.services.db.query(`UPDATE jobs SET run_at = now() + interval '1 day'`);
  const reply = await upload(project, { filename: 'pixel.png', content_type: 'image/png', bytes: PNG });
  expect(reply.body.status).toBe('processing');
  return reply.body.id;
}

describe('leases kept by heartbeat', () => {
  let project: TestProject;
  beforeAll(async () => {
    project = await coffer.newProject({ virus_scan_enabled: true });
  });

  it('gives the scan of a worker that lost its database to another worker after the lease; the first stops and writes nothing', async () => {
    const id = await processingFile(project);
    expect((await queueDepth(coffer.services.db, JOBS)).find((depth) => depth.kind === 'scan')?.due).toBe(1);
    const other = await secondDb();
    const severed = severable(other);
    const hanging = hangingScanner();
    const first = leased(hanging, { concurrency: 1 }, severed.db);
    try {
      expect(await first.runner.runOnce()).toBe(1);
      await hanging.started;
      const [claimed] = await jobsOf(id);
      expect(claimed).toMatchObject({ kind: 'scan', attempts: 1, lease_token: expect.any(String) });

      // The first worker is cut off (as if dead to the database): its heartbeat stops renewing.
      severed.cut();
      const second = cleanScanner();
      await processUntilSettled(coffer.services.db, id, leased(second));
      expect((await project.call('GET', `/files/${id}`)).body.status).toBe('ready');
      expect(second.scans).toBe(1);

      // The first worker gave the job up once its lease ran out: its scan was stopped, nothing written.
      expect(((await hanging.stopped).cause as Error).name).toBe('LeaseLostError');
      await first.runner.settle();
      expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.ready']);
      expect(await jobsOf(id)).toEqual([]);
    } finally {
      await first.runner.close();
      if (other !== coffer.services.db) await other.close();
    }
  });

  it('keeps a scan running longer than its lease to its worker: no other worker takes it', async () => {
    const id = await processingFile(project);
    let scans = 0;
    const slow: Scanner = {
      name: 'slow',
      async scan(stream) {
        scans++;
        for await (const _ of stream);
        await sleep(3500); // three and a half leases
        return { clean: true };
      },
      ping: async () => {},
    };
    const other = await secondDb();
    const rival = cleanScanner();
    const first = leased(slow);
    const second = leased(rival, {}, other);
    try {
      let done = false;
      const running = first.runOnce().finally(() => {
        done = true;
      });
      // The rival starts once the first worker holds the job: on a busy machine it could otherwise
      // claim it first, which says nothing about a lease kept past its length.
      await until('the first worker to start its scan', async () => scans === 1 || done);
      while (!done) {
        await second.runOnce();
        await sleep(100);
      }
      expect(await running).toBe(1);
    } finally {
      if (other !== coffer.services.db) await other.close();
    }
    expect(scans).toBe(1);
    expect(rival.scans).toBe(0);
    expect((await project.call('GET', `/files/${id}`)).body.status).toBe('ready');
    expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.ready']);
  });

  describe.skipIf(backend !== 'postgres')('a worker process killed mid-scan', () => {
    it('leaves its scan to another worker within about a lease', async () => {
      const id = await processingFile(project);
      const clamd = await startFakeClamd(await freePort(), 'hang');
      try {
        const url = new URL(process.env.COFFER_TEST_DATABASE_URL!);
        url.searchParams.set('options', `-c search_path=${namespace()},public`);
        const worker = startProcess('worker', 'worker', {
          COFFER_DATABASE_URL: url.toString(),
          COFFER_DATA_DIR: coffer.config.dataDir,
          COFFER_ADMIN_KEY: ADMIN_KEY,
          COFFER_CLAMD_URL: `tcp://127.0.0.1:${clamd.port}`,
          COFFER_JOB_LEASE_SECONDS: '1',
          COFFER_LOG_LEVEL: 'warn',
          ...testStorageEnv(),
        });
        await until('the worker to start scanning', async () => {
          const [job] = await jobsOf(id);
          return job?.lease_token !== null && job?.attempts === 1;
        });
        await clamd.scanning;
        await kill(worker);

        await processUntilSettled(coffer.services.db, id, leased(cleanScanner()));
        expect((await project.call('GET', `/files/${id}`)).body.status).toBe('ready');
        expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.ready']);
      } finally {
        await clamd.close();
      }
    }, 60_000);
  });
});

describe('scanner unavailable: retry window and rescan', () => {
  let port: number;
  let quick: TestCoffer;
  let project: TestProject;
  beforeAll(async () => {
    port = await freePort(); // nobody listens: the scanner is down
    quick = await startCoffer({
      COFFER_SCAN_RETRY_WINDOW_SECONDS: '1',
      COFFER_CLAMD_URL: `tcp://127.0.0.1:${port}`,
    });
    project = await quick.newProject({ virus_scan_enabled: true });
  });
  afterAll(() => quick?.close());

  it('retries within COFFER_SCAN_RETRY_WINDOW_SECONDS, then fails the file closed; rescan scans it again once the scanner is back', async () => {
    const { db, pipeline } = quick.services;
    await drain(pipeline); // whatever earlier tests left
    const id = (await upload(project, { bytes: 'clean bytes' })).body.id as string;
    expect(await pipeline.runOnce()).toBeGreaterThanOrEqual(1);
    // Still within the window: processing, the job waiting for its retry.
    expect((await project.call('GET', `/files/${id}`)).body.status).toBe('processing');
    const [waiting] = await db.query<{ attempts: number; last_error: string; failing_since: Date }>(
      'SELECT attempts, last_error, failing_since FROM jobs WHERE file_id = $1',
      [id],
    );
    expect(waiting).toMatchObject({
      attempts: 1,
      last_error: expect.any(String),
      failing_since: expect.any(Date),
    });

    await processUntilSettled(db, id, pipeline);
    const file = (await project.call('GET', `/files/${id}`)).body;
    expect(file.status).toBe('failed');
    expect(file.failure_reason).toMatch(/^scan_unavailable: /);
    expect(await db.query('SELECT id FROM jobs WHERE file_id = $1', [id])).toEqual([]);
    expect(await eventTypes(db, id)).toEqual(['file.uploaded', 'file.failed']);
    expect((await project.call('GET', `/files/${id}/download`)).status).toBe(409);

    // The scanner comes back; rescan queues the scan again, in the transaction that makes the file processing.
    const clamd = await startFakeClamd(port, 'clean');
    try {
      const rescan = await project.call('POST', `/files/${id}/rescan`);
      expect(rescan.status, JSON.stringify(rescan.body)).toBe(202);
      expect(rescan.body).toMatchObject({ id, status: 'processing', failure_reason: null });
      expect(await db.query('SELECT kind FROM jobs WHERE file_id = $1', [id])).toEqual([{ kind: 'scan' }]);
      const again = await project.call('POST', `/files/${id}/rescan`);
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('INVALID_STATE');

      await drain(pipeline);
      expect((await project.call('GET', `/files/${id}`)).body).toMatchObject({
        status: 'ready',
        failure_reason: null,
      });
      expect(await eventTypes(db, id)).toEqual(['file.uploaded', 'file.failed', 'file.ready']);
      expect((await project.call('GET', `/files/${id}/download`)).status).toBe(200);
    } finally {
      await clamd.close();
    }
  });
});

describe('POST /files/{file_id}/rescan refusals', () => {
  let project: TestProject;
  beforeAll(async () => {
    project = await coffer.newProject({ virus_scan_enabled: true });
  });

  const expectRefused = async (id: string, status: number, code: string, key?: string) => {
    const reply = await project.call('POST', `/files/${id}/rescan`, { token: key });
    expect(reply.status, JSON.stringify(reply.body)).toBe(status);
    expect(reply.body.error).toMatchObject({
      code,
      message: expect.any(String),
      request_id: expect.any(String),
    });
    return reply.body.error;
  };

  it('refuses files that are not failed for an unavailable scanner, with 409 INVALID_STATE', async () => {
    const uploading = (await initiate(project)).file_id;
    expect((await expectRefused(uploading, 409, 'INVALID_STATE')).details).toMatchObject({
      status: 'uploading',
    });

    const processing = await processingFile(project);
    expect((await expectRefused(processing, 409, 'INVALID_STATE')).details).toMatchObject({
      status: 'processing',
    });

    await drain(leased(cleanScanner()));
    expect((await expectRefused(processing, 409, 'INVALID_STATE')).details).toMatchObject({
      status: 'ready',
    });

    // Failed for another reason (its bytes are not what they claim): scanning again changes nothing.
    const mismatch = (
      await upload(project, { filename: 'r.pdf', content_type: 'application/pdf', bytes: PNG })
    ).body.id;
    await drain(leased(cleanScanner()));
    expect((await expectRefused(mismatch, 409, 'INVALID_STATE')).details).toMatchObject({
      status: 'failed',
      failure_reason: expect.stringMatching(/^mime_mismatch/),
    });
    expect(await coffer.services.db.query('SELECT id FROM jobs WHERE file_id = $1', [mismatch])).toEqual([]);
  });

  it('answers 404 for an unknown file and for a file of another project', async () => {
    await expectRefused('file_01ARZ3NDEKTSV4RRFFQ69G5FAV', 404, 'NOT_FOUND');
    const elsewhere = await coffer.newProject();
    const theirs = (await upload(elsewhere, { bytes: 'x' })).body.id;
    await expectRefused(theirs, 404, 'NOT_FOUND');
  });

  it('needs files:update_metadata', async () => {
    const reader = await keyWith(coffer, project, ['files:read', 'files:upload']);
    const id = (await initiate(project)).file_id;
    await expectRefused(id, 403, 'INSUFFICIENT_SCOPE', reader.key);
  });
});
