/**
 * The tus endpoint against Coffer's own ways in, in the same run:
 *   1. a large upload in 8 MiB PATCHes, one after the other as tus sends them (create → PATCH… → the
 *      last PATCH completes), against Coffer's REST multipart upload of as much (bench/multipart.ts:
 *      start → part URLs and PUTs, COFFER_BENCH_PARTS_IN_FLIGHT at once → complete), and against the
 *      same with one part in flight (the serial shape of a tus upload), each round in another order;
 *   2. 1 KiB uploads in one request each (creation-with-upload) per second, against B1 (one INSERT
 *      behind a bare Fastify route, bench/insert-server.ts) under the same load.
 * The SHA-256 the server records is checked against the bytes sent.
 *
 * Environment: COFFER_BENCH_SIZE_MB, COFFER_BENCH_ROUNDS (see bench/run.ts); COFFER_BENCH_TUS_PATCH_MB
 * (default 8); COFFER_BENCH_SMALL_COUNT, COFFER_BENCH_CONCURRENCY as bench/uploads.ts.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { request } from 'undici';
import { agent, call, createProject, expectStatus, type Project } from './client.ts';
import { startInsertServer } from './helper-servers.ts';
import { type Bench, envInteger, KiB, MiB, progress } from './lib.ts';
import { fmt, type Measurement, measure, median, pool } from './measure.ts';
import { Data, type MultipartTimes, multipartUpload, plan } from './multipart.ts';
import type { Section } from './report.ts';

const LARGE_TARGET = 0.9;
const SMALL_TARGET = 0.5;

const b64 = (text: string) => Buffer.from(text).toString('base64');

/** One tus request; answers its status and headers (its body read through). */
async function tus(
  url: string,
  method: 'POST' | 'PATCH',
  project: Project,
  headers: Record<string, string>,
  body?: Buffer | NodeJS.ReadableStream,
) {
  const response = await request(url, {
    method,
    headers: { 'tus-resumable': '1.0.0', authorization: `Bearer ${project.key}`, ...headers },
    body: body as never,
    dispatcher: agent,
  });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, text };
}

const header = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value) ?? '';

/** create → PATCHes of `patchMib` → (the last one completes); answers the file's id. */
async function tusUpload(
  base: string,
  project: Project,
  data: Data,
  mib: number,
  patchMib: number,
  name: string,
) {
  const created = await tus(`${base}/tus`, 'POST', project, {
    'upload-length': String(mib * MiB),
    'upload-metadata': `filename ${b64(name)}`,
  });
  if (created.status !== 201) throw new Error(`tus create: ${created.status} ${created.text}`);
  const url = header(created.headers.location);
  for (let first = 0; first < mib; first += patchMib) {
    const count = Math.min(patchMib, mib - first);
    const patched = await tus(
      url,
      'PATCH',
      project,
      {
        'upload-offset': String(first * MiB),
        'content-type': 'application/offset+octet-stream',
        'content-length': String(count * MiB),
      },
      data.stream(first, count),
    );
    if (patched.status !== 204)
      throw new Error(`tus PATCH at ${first} MiB: ${patched.status} ${patched.text}`);
  }
  return header(created.headers['x-coffer-file-id']);
}

interface Round {
  tus: Measurement<string>;
  multipart: Measurement<MultipartTimes>;
  /** The same multipart upload with one part in flight: a request at a time, as a tus client sends. */
  serial: Measurement<MultipartTimes>;
}

const SIDES = ['tus', 'multipart', 'serial'] as const;

export const tusBench: Bench = {
  name: 'tus',
  description: 'tus: a large upload in 8 MiB PATCHes vs REST multipart; 1 KiB creation-with-upload vs B1',
  async run(context) {
    const { server, sizeMib } = context;
    const patchMib = envInteger('COFFER_BENCH_TUS_PATCH_MB', 8);
    const inFlight = envInteger('COFFER_BENCH_PARTS_IN_FLIGHT', 4);
    const count = envInteger('COFFER_BENCH_SMALL_COUNT', 2000);
    const concurrency = envInteger('COFFER_BENCH_CONCURRENCY', 16);
    const project = await createProject(server);
    const data = new Data();
    const expected = data.sha256(sizeMib);
    const checksumOf = async (fileId: string) =>
      (await project.api<{ checksum_sha256: string; status: string }>('GET', `/files/${fileId}`)).body;

    progress('warm-up: tus and multipart of 64 MiB');
    await tusUpload(server.url, project, data, 64, patchMib, 'tus-warm-up.bin');
    await multipartUpload(project, data, plan(64, inFlight), 'multipart-warm-up.bin');

    const rounds: Round[] = [];
    for (let round = 1; round <= context.rounds; round++) {
      // Each side first in turn, so that no side always follows the same one.
      const sides = SIDES.map((_, i) => SIDES[(i + round - 1) % SIDES.length]!);
      const done: Partial<Round> = {};
      for (const side of sides) {
        progress(`tus ${fmt.size(sizeMib)} round ${round}/${context.rounds}: ${side}`);
        if (side === 'tus') {
          done.tus = await measure(server, () =>
            tusUpload(server.url, project, data, sizeMib, patchMib, `tus-${round}.bin`),
          );
          const file = await checksumOf(done.tus.result);
          if (file.checksum_sha256 !== expected || file.status !== 'ready') {
            throw new Error(
              `tus: ${file.status}, SHA-256 ${file.checksum_sha256}; the sent bytes have ${expected}`,
            );
          }
        } else {
          const parts = side === 'multipart' ? inFlight : 1;
          done[side] = await measure(server, () =>
            multipartUpload(project, data, plan(sizeMib, parts), `${side}-${round}.bin`),
          );
        }
      }
      rounds.push(done as Round);
    }
    const largeRatio = median(rounds.map((r) => r.multipart.seconds / r.tus.seconds));
    const serialRatio = median(rounds.map((r) => r.serial.seconds / r.tus.seconds));
    const rate = (seconds: number) => fmt.rate(sizeMib / seconds);
    const cpuPerGib = (side: (typeof SIDES)[number]) =>
      ((median(rounds.map((r) => r[side].serverCpu)) / sizeMib) * 1024).toFixed(2);

    // Small files: one request each, against B1 before and after.
    const payload = randomBytes(KiB);
    const b1 = await startInsertServer(join(context.scratch, 'tus-b1'));
    const insert = async (i: number) => {
      const reply = await call('POST', `${b1.url}/files`, {
        body: { filename: `small-${i}.bin`, content_type: 'application/octet-stream', size_bytes: KiB },
      });
      expectStatus(reply, 201, 'B1 insert');
    };
    const small = async (i: number) => {
      const created = await tus(
        `${server.url}/tus`,
        'POST',
        project,
        {
          'upload-length': String(KiB),
          'upload-metadata': `filename ${b64(`small-${i}.bin`)}`,
          'content-type': 'application/offset+octet-stream',
        },
        payload,
      );
      if (created.status !== 201 || header(created.headers['upload-offset']) !== String(KiB)) {
        throw new Error(`tus creation-with-upload: ${created.status} ${created.text}`);
      }
    };
    let b1Rates: number[];
    let smallRate: number;
    try {
      progress('warm-up: 200 small tus uploads, 500 B1 inserts');
      await pool(200, concurrency, (i) => small(-1 - i));
      await pool(500, concurrency, insert);
      const timed = async (task: (i: number) => Promise<void>) => {
        const start = performance.now();
        await pool(count, concurrency, task);
        return count / ((performance.now() - start) / 1000);
      };
      progress(`B1 × ${count}, ${concurrency} in flight`);
      const before = await timed(insert);
      progress(`tus creation-with-upload 1 KiB × ${count}, ${concurrency} in flight`);
      smallRate = await timed(small);
      progress(`B1 × ${count} again`);
      b1Rates = [before, await timed(insert)];
    } finally {
      await b1.close();
    }
    const b1Rate = (b1Rates[0]! + b1Rates[1]!) / 2;

    const sections: Section[] = [
      {
        title: `tus: ${fmt.size(sizeMib)} in ${fmt.size(patchMib)} PATCHes against REST multipart (${inFlight} parts in flight), ${rounds.length} round${rounds.length === 1 ? '' : 's'} (medians); 1 KiB uploads in one request, ${concurrency} in flight`,
        rows: [
          {
            benchmark: `tus ${fmt.size(sizeMib)} (create → PATCH × ${Math.ceil(sizeMib / patchMib)})`,
            coffer: rate(median(rounds.map((r) => r.tus.seconds))),
            baseline: `${rate(median(rounds.map((r) => r.multipart.seconds)))} multipart`,
            ratio: largeRatio,
            target: `≥ ${fmt.ratio(LARGE_TARGET)}`,
            met: largeRatio >= LARGE_TARGET,
          },
          {
            benchmark: '  the same against REST multipart, one part in flight',
            coffer: rate(median(rounds.map((r) => r.tus.seconds))),
            baseline: `${rate(median(rounds.map((r) => r.serial.seconds)))} multipart`,
            ratio: serialRatio,
          },
          {
            benchmark: `tus creation-with-upload 1 KiB × ${count}`,
            coffer: fmt.perSecond(smallRate, 'uploads'),
            baseline: `${fmt.perSecond(b1Rate, 'req')} B1`,
            ratio: smallRate / b1Rate,
            target: `≥ ${fmt.ratio(SMALL_TARGET)}`,
            met: smallRate / b1Rate >= SMALL_TARGET,
          },
        ],
        notes: [
          'tus time: from the creation to the answer of the last PATCH, which completes the file; the PATCHes are sent one after the other (a tus client has one in flight), each streamed from one 2 MiB random buffer',
          'one part in flight: the multipart upload sent a request at a time, as a tus client sends its PATCHes (the protocol has one in flight per upload); what the parts in flight add beyond it is concurrency, which a tus upload does not have',
          `server CPU per GiB (median): tus ${cpuPerGib('tus')} s, multipart ${cpuPerGib('multipart')} s, one part in flight ${cpuPerGib('serial')} s`,
          `B1 ${fmt.perSecond(b1Rates[0]!, 'req')} before and ${fmt.perSecond(b1Rates[1]!, 'req')} after; the ratio uses their mean`,
        ],
      },
    ];
    return sections;
  },
};
