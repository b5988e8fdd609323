import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claim, JOBS } from '../../src/infra/jobs/index.ts';
import { createClamdScanner, eicarTestFile, type Scanner } from '../../src/infra/scanner/index.ts';
import { createPipeline } from '../../src/modules/pipeline/service.ts';
import { secondDb } from '../support/backends.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { type FakeClamd, startFakeClamd } from '../support/fake-clamd.ts';
import { put, upload } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import { drain, eventTypes, PNG, pipelineWith, quiet } from '../support/pipeline.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

async function processing(project: TestProject, input: Parameters<typeof upload>[1]) {
  const reply = await upload(project, input);
  expect(reply.body.status).toBe('processing');
  return reply.body.id as string;
}

describe('processing pipeline', () => {
  let project: TestProject;
  beforeAll(async () => {
    project = await coffer.newProject({ virus_scan_enabled: true });
  });

  it('takes a clean file to ready and records file.ready', async () => {
    const id = await processing(project, { filename: 'pixel.png', content_type: 'image/png', bytes: PNG });
    await drain(coffer.services.pipeline);
    const file = (await project.call('GET', `/files/${id}`)).body;
    expect(file).toMatchObject({ status: 'ready', failure_reason: null, scan_signature: null });
    expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.ready']);
    expect((await project.call('GET', `/files/${id}/download`)).status).toBe(200);
  });

  it('quarantines EICAR, keeps the signature, records file.quarantined, then answers 409', async () => {
    const id = await processing(project, {
      filename: 'eicar.txt',
      content_type: 'text/plain',
      bytes: eicarTestFile(),
    });
    await drain(coffer.services.pipeline);
    const [row] = await coffer.services.db.query<{ status: string; scan_signature: string }>(
      'SELECT status, scan_signature FROM files WHERE id = $1',
      [id],
    );
    expect(row).toMatchObject({ status: 'quarantined', scan_signature: expect.stringMatching(/^Eicar/) });
    expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.quarantined']);
    const reply = await project.call('GET', `/files/${id}`);
    expect(reply.status).toBe(409);
    expect(reply.body.error.code).toBe('CONFLICT');
    expect((await project.call('GET', `/files/${id}/download`)).status).toBe(409);
  });

  it.each([
    ['a PNG declared as PDF', 'report.pdf', 'application/pdf', PNG],
    [
      'HTML declared as PNG',
      'pixel.png',
      'image/png',
      Buffer.from('<!doctype html><html><body>hi</body></html>'),
    ],
    [
      'binary declared as text',
      'notes.txt',
      'text/plain',
      Buffer.from([0x00, 0x01, 0x02, 0xff, 0xfe, 0x00, 0x10]),
    ],
    ['a PNG declared as text', 'notes.txt', 'text/plain', PNG],
    ['compressed HTML declared as a PNG', 'pixel.png.gz', 'image/png', gzipSync('<!doctype html><p>hi</p>')],
    ['a compressed PNG in a name that does not say so', 'pixel.png', 'image/png', gzipSync(PNG)],
  ])('fails %s with a reason and records file.failed', async (_what, filename, contentType, bytes) => {
    const id = await processing(project, { filename, content_type: contentType, bytes });
    await drain(coffer.services.pipeline);
    const file = (await project.call('GET', `/files/${id}`)).body;
    expect(file.status).toBe('failed');
    expect(file.failure_reason).toMatch(/^mime_mismatch: declared /);
    expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.failed']);
    const download = await project.call('GET', `/files/${id}/download`);
    expect(download.status).toBe(409);
    expect(download.body.error.code).toBe('INVALID_STATE');
  });

  it('accepts what it cannot recognise as declared, and textual types holding text', async () => {
    const csv = await processing(project, {
      filename: 'a.csv',
      content_type: 'text/csv',
      bytes: 'a,b\n1,2\n',
    });
    const json = await processing(project, {
      filename: 'a.json',
      content_type: 'application/json',
      bytes: '{"a":1}',
    });
    const blob = await processing(project, {
      filename: 'a.dat',
      content_type: 'application/x-custom',
      bytes: 'zz',
    });
    const empty = await processing(project, { filename: 'empty.png', content_type: 'image/png', bytes: '' });
    const vcard = await processing(project, {
      filename: 'ada.vcf',
      content_type: 'text/vcard',
      bytes: 'BEGIN:VCARD\nVERSION:4.0\nFN:Ada\nEND:VCARD\n',
    });
    // Named *.gz and declared as what it holds, as Python's mimetypes names it.
    const compressed = await processing(project, {
      filename: 'notes.txt.gz',
      content_type: 'text/plain',
      bytes: gzipSync('plain notes\n'.repeat(100)),
    });
    await drain(coffer.services.pipeline);
    for (const id of [csv, json, blob, empty, vcard, compressed]) {
      expect((await project.call('GET', `/files/${id}`)).body.status, id).toBe('ready');
    }
  });

  it('leaves a file deleted while processing alone', async () => {
    const id = await processing(project, { bytes: 'x' });
    await project.call('DELETE', `/files/${id}`);
    await drain(coffer.services.pipeline);
    expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.deleted']);
    const jobs = await coffer.services.db.query('SELECT id FROM jobs WHERE file_id = $1', [id]);
    expect(jobs).toEqual([]);
  });
});

describe('new content of a versioned file', () => {
  /** Uploads and confirms new bytes for the file; the scan leaves them `processing`. */
  async function newContent(project: TestProject, fileId: string, bytes: string): Promise<string> {
    const started = await project.call('POST', `/files/${fileId}/versions`, {
      body: { size_bytes: Buffer.byteLength(bytes), content_type: 'text/plain' },
    });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    expect((await put(started.body.upload_url, bytes)).status).toBe(200);
    const confirmed = await project.call(
      'POST',
      `/files/${fileId}/versions/${started.body.version_id}/confirm`,
    );
    expect(confirmed.body.status).toBe('processing');
    return started.body.version_id;
  }

  it.each(['before', 'during'])(
    'discards it when the file is deleted %s its scan, and collects its object',
    async (when) => {
      const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0' });
      try {
        const project = await quick.newProject({ versioning_enabled: true, virus_scan_enabled: true });
        const fileId = (await upload(project, { bytes: 'one' })).body.id as string;
        await drain(quick.services.pipeline);
        const contentId = await newContent(project, fileId, 'two');
        const remove = async () =>
          expect((await project.call('DELETE', `/files/${fileId}`)).status).toBe(200);
        if (when === 'before') await remove();
        const deleting: Scanner = {
          name: 'deleting',
          async scan(stream) {
            for await (const _ of stream);
            if (when === 'during') await remove();
            return { clean: true };
          },
          ping: async () => {},
        };
        const { db, store, projects } = quick.services;
        await drain(createPipeline({ db, store, scanner: deleting, projects, logger: quiet }));

        const content = async () =>
          (
            await db.query<{ status: string; failure_reason: string; storage_key: string; purged_at: Date }>(
              'SELECT status, failure_reason, storage_key, purged_at FROM pending_contents WHERE id = $1',
              [contentId],
            )
          )[0]!;
        expect(await content()).toMatchObject({ status: 'failed', failure_reason: 'file_deleted' });
        expect(await db.query('SELECT id FROM jobs WHERE file_id = $1', [fileId])).toEqual([]);
        expect(await eventTypes(coffer.services.db, fileId)).toEqual([
          'file.uploaded',
          'file.ready',
          'file.deleted',
        ]);

        await new Promise((resolve) => setTimeout(resolve, 20));
        await quick.services.collector.sweep();
        const collected = await content();
        expect(collected.purged_at).not.toBeNull();
        expect(await quick.services.store.head(collected.storage_key)).toBeUndefined();
      } finally {
        await quick.close();
      }
    },
  );
});

describe('failing closed', () => {
  let fake: FakeClamd | undefined;
  afterAll(() => fake?.close());

  it('retries while clamd is down, keeps the file processing, and finishes when it is back', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const id = await processing(project, { bytes: 'clean bytes' });
    // A port nobody listens on yet: the scanner is down.
    const port = await freePort();
    const pipeline = pipelineWith(
      coffer,
      createClamdScanner(`tcp://127.0.0.1:${port}`, { timeoutMs: 2000 }),
      {
        backoffSeconds: () => 0,
      },
    );
    expect(await pipeline.runOnce()).toBeGreaterThanOrEqual(1);
    expect((await project.call('GET', `/files/${id}`)).body.status).toBe('processing');
    const [job] = await coffer.services.db.query<{ attempts: number; last_error: string }>(
      'SELECT attempts, last_error FROM jobs WHERE file_id = $1',
      [id],
    );
    expect(job!.attempts).toBe(1);
    expect(job!.last_error).toBeTruthy();

    // clamd comes back (a minimal INSTREAM responder) and the retry finishes the file.
    fake = await startFakeClamd(port, 'clean');
    await drain(pipeline);
    expect((await project.call('GET', `/files/${id}`)).body.status).toBe('ready');
  });

  it('fails the file, never marks it clean, when the scanner stays down past the retry window', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const id = await processing(project, { bytes: 'clean bytes' });
    const down: Scanner = {
      name: 'down',
      scan: async (stream) => {
        stream.destroy();
        throw new Error('connection refused');
      },
      ping: async () => {},
    };
    const pipeline = pipelineWith(coffer, down, { retryWindowSeconds: 0.3, backoffSeconds: () => 0.05 });
    const deadline = Date.now() + 10_000;
    while (
      (await project.call('GET', `/files/${id}`)).body.status === 'processing' &&
      Date.now() < deadline
    ) {
      await pipeline.runOnce();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const file = (await project.call('GET', `/files/${id}`)).body;
    expect(file.status).toBe('failed');
    expect(file.failure_reason).toMatch(/^scan_unavailable/);
    expect(await eventTypes(coffer.services.db, id)).toEqual(['file.uploaded', 'file.failed']);
  });

  it('fails a file the engine cannot scan whole', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const id = await processing(project, { bytes: 'too big for clamd' });
    const { ScanRejectedError } = await import('../../src/infra/scanner/index.ts');
    const limited: Scanner = {
      name: 'limited',
      scan: async (stream) => {
        stream.destroy();
        throw new ScanRejectedError('INSTREAM size limit exceeded');
      },
      ping: async () => {},
    };
    await drain(pipelineWith(coffer, limited));
    const file = (await project.call('GET', `/files/${id}`)).body;
    expect(file).toMatchObject({
      status: 'failed',
      failure_reason: expect.stringMatching(/^scan_incomplete/),
    });
  });
});

describe('durability and concurrency', () => {
  it('finishes files left processing by a server that was stopped', async () => {
    const first = await startCoffer();
    const project = await first.newProject({ virus_scan_enabled: true });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await upload(project, { bytes: `file ${i}` })).body.id as string);
    // A worker of the first server claimed one job and died with it.
    await claim(first.services.db, JOBS, { kinds: ['scan'], limit: 1, leaseSeconds: 1 });
    await first.close();

    const second = await startCoffer({ COFFER_DATA_DIR: first.config.dataDir }, { workers: true });
    try {
      const deadline = Date.now() + 15_000;
      let statuses: string[] = [];
      while (Date.now() < deadline) {
        statuses = await Promise.all(
          ids.map(
            async (id) =>
              (await second.call('GET', `/v1/projects/${project.id}/files/${id}`, { token: project.key }))
                .body.status,
          ),
        );
        if (statuses.every((s) => s === 'ready')) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(statuses).toEqual(['ready', 'ready', 'ready']);
    } finally {
      await second.close();
    }
  });

  it('never lets two workers process the same file', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await processing(project, { bytes: `payload ${i}` }));
    const scans = new Map<string, number>();
    const counting: Scanner = {
      name: 'counting',
      async scan(stream) {
        let text = '';
        for await (const chunk of stream) text += chunk;
        scans.set(text, (scans.get(text) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, 20));
        return { clean: true };
      },
      ping: async () => {},
    };
    const other = await secondDb();
    try {
      const a = pipelineWith(coffer, counting, { concurrency: 3 });
      const b = pipelineWith(coffer, counting, { concurrency: 3 }, other);
      await Promise.all([drain(a), drain(b), drain(a), drain(b)]);
    } finally {
      if (other !== coffer.services.db) await other.close();
    }
    for (let i = 0; i < 12; i++) expect(scans.get(`payload ${i}`), `payload ${i}`).toBe(1);
    for (const id of ids) expect((await project.call('GET', `/files/${id}`)).body.status).toBe('ready');
  });
});
