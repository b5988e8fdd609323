/**
 * A large multipart upload, end to end, against the raw disk and against the single presigned PUT:
 *   start → a part URL per part → PUT of the parts (COFFER_BENCH_PARTS_IN_FLIGHT at once, default 4)
 *   → complete (which renames the parts into place on the server), timed as a whole and step by step;
 *   the confirmed checksum_sha256 is checked against the SHA-256 of the bytes sent.
 * Baselines of the same run: `dd` writing as much with fdatasync (page cache dropped before every side),
 * and a single PUT of as much through a presigned URL (the path of bench/uploads.ts). The server's RSS is
 * sampled throughout, at two sizes (a quarter of COFFER_BENCH_SIZE_MB, then all of it).
 *
 * Environment: COFFER_BENCH_SIZE_MB, COFFER_BENCH_ROUNDS (see bench/run.ts);
 * COFFER_BENCH_PART_MB (default: the size / 16, at least 5); COFFER_BENCH_PARTS_IN_FLIGHT (default 4).
 */
import { createHash, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { agent, createProject, expectStatus, type Project } from './client.ts';
import { dropCaches, rawWrite } from './disk.ts';
import { type Bench, type BenchContext, envInteger, MiB, progress } from './lib.ts';
import { fmt, type Measurement, measure, median, pool } from './measure.ts';
import { retainedRssRow, type Section } from './report.ts';

const CONTENT_TYPE = 'application/octet-stream';
const TARGET = 0.7;
/** The server's RSS may grow this much while it moves a large object (as in bench/uploads.ts). */
const MEMORY_LIMIT = 100 * MiB;
const MIN_PART_MIB = 5;

// ------------------------------------------------------------------------------------------------ data

/**
 * The bytes of an upload: MiB number k is a 1 MiB window of one 2 MiB random buffer, at an offset
 * that depends on k. No two neighbouring MiB are equal (so a part mixed up with another changes the
 * SHA-256), and no part is ever held in memory: every chunk is a view of the same buffer.
 */
export class Data {
  readonly #random = randomBytes(2 * MiB);

  chunk(k: number): Buffer {
    const offset = (k * 40_961) % MiB;
    return this.#random.subarray(offset, offset + MiB);
  }

  /** The MiB [first, first + count) as a stream. */
  stream(first: number, count: number): Readable {
    const data = this;
    return Readable.from(
      (function* () {
        for (let k = first; k < first + count; k++) yield data.chunk(k);
      })(),
      { objectMode: false },
    );
  }

  sha256(mib: number): string {
    const hash = createHash('sha256');
    for (let k = 0; k < mib; k++) hash.update(this.chunk(k));
    return hash.digest('hex');
  }
}

// -------------------------------------------------------------------------------------------- uploads

export interface Plan {
  mib: number;
  partMib: number;
  /** [first MiB, MiB count] of each part, in order. */
  parts: [number, number][];
  inFlight: number;
}

export function plan(mib: number, inFlight: number): Plan {
  const partMib = envInteger(
    'COFFER_BENCH_PART_MB',
    Math.max(MIN_PART_MIB, Math.ceil(mib / 16)),
    MIN_PART_MIB,
  );
  const parts: [number, number][] = [];
  for (let first = 0; first < mib; first += partMib) parts.push([first, Math.min(partMib, mib - first)]);
  return { mib, partMib, parts, inFlight };
}

export interface MultipartTimes {
  /** Seconds of each step, from the client's side: start, part URLs + part PUTs, complete. */
  start: number;
  parts: number;
  complete: number;
  checksum: string;
  status: string;
}

async function putBody(url: string, size: number, body: Readable, contentType?: string): Promise<string> {
  const response = await request(url, {
    method: 'PUT',
    headers: { 'content-length': String(size), ...(contentType ? { 'content-type': contentType } : {}) },
    body,
    dispatcher: agent,
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`PUT: expected 200, got ${response.statusCode} ${text}`);
  const etag = response.headers.etag;
  return typeof etag === 'string' ? etag : '';
}

/** start → part URL and PUT of every part (`inFlight` at once) → complete; each step timed. */
export async function multipartUpload(
  project: Project,
  data: Data,
  p: Plan,
  name: string,
): Promise<MultipartTimes> {
  const t0 = performance.now();
  const started = await project.api<{ upload_id: string; file_id: string }>(
    'POST',
    '/files/upload/multipart/start',
    { filename: name, content_type: CONTENT_TYPE, total_size_bytes: p.mib * MiB },
  );
  expectStatus(started, 201, 'multipart start');
  const session = `/files/upload/multipart/${started.body.upload_id}`;
  const t1 = performance.now();
  const etags: string[] = [];
  await pool(p.parts.length, p.inFlight, async (i) => {
    const [first, count] = p.parts[i]!;
    const part = await project.api<{ url: string }>('GET', `${session}/part-url?part=${i + 1}`);
    expectStatus(part, 200, `part URL ${i + 1}`);
    etags[i] = await putBody(part.body.url, count * MiB, data.stream(first, count));
  });
  const t2 = performance.now();
  const completed = await project.api<{ status: string; checksum_sha256: string }>(
    'POST',
    `${session}/complete`,
    { parts: etags.map((etag, i) => ({ part_number: i + 1, etag })) },
  );
  expectStatus(completed, 200, 'multipart complete');
  const t3 = performance.now();
  return {
    start: (t1 - t0) / 1000,
    parts: (t2 - t1) / 1000,
    complete: (t3 - t2) / 1000,
    checksum: completed.body.checksum_sha256,
    status: completed.body.status,
  };
}

/** initiate → PUT of the whole object through its presigned URL → confirm (the flow of bench/uploads.ts). */
async function singleUpload(project: Project, data: Data, mib: number, name: string): Promise<string> {
  const started = await project.api<{ file_id: string; upload_url: string }>('POST', '/files/upload', {
    filename: name,
    content_type: CONTENT_TYPE,
    size_bytes: mib * MiB,
  });
  expectStatus(started, 201, 'initiate');
  await putBody(started.body.upload_url, mib * MiB, data.stream(0, mib), CONTENT_TYPE);
  const confirmed = await project.api<{ checksum_sha256: string }>(
    'POST',
    `/files/${started.body.file_id}/confirm`,
  );
  expectStatus(confirmed, 200, 'confirm');
  return confirmed.body.checksum_sha256;
}

// --------------------------------------------------------------------------------------------- rounds

type Side = 'raw' | 'multipart' | 'single';
const SIDES: Side[] = ['raw', 'multipart', 'single'];

interface Round {
  rawWrite: number;
  multipart: Measurement<MultipartTimes>;
  single: Measurement<string>;
}

interface Result {
  plan: Plan;
  rounds: Round[];
}

async function rounds(context: BenchContext, project: Project, data: Data, p: Plan): Promise<Result> {
  const { server, scratch, canDropCaches } = context;
  const rawFile = join(scratch, `multipart-raw-${p.mib}`);
  const expected = data.sha256(p.mib);
  const results: Round[] = [];
  for (let round = 1; round <= context.rounds; round++) {
    // Each round starts with another side, so that drifts of the disk's speed hit all sides alike.
    const order = SIDES.map((_, i) => SIDES[(i + round - 1) % SIDES.length]!);
    let raw = 0;
    let multipart: Measurement<MultipartTimes> | undefined;
    let single: Measurement<string> | undefined;
    for (const side of order) {
      if (canDropCaches) dropCaches();
      progress(`multipart ${fmt.size(p.mib)} round ${round}/${context.rounds}: ${side}`);
      if (side === 'raw') {
        rmSync(rawFile, { force: true });
        raw = await rawWrite(rawFile, p.mib);
      } else if (side === 'multipart') {
        multipart = await measure(server, () =>
          multipartUpload(project, data, p, `multipart-${p.mib}-${round}.bin`),
        );
        const { checksum, status } = multipart.result;
        if (checksum !== expected || status !== 'ready') {
          throw new Error(
            `multipart complete: ${status}, SHA-256 ${checksum}; the sent bytes have ${expected}`,
          );
        }
      } else {
        single = await measure(server, () =>
          singleUpload(project, data, p.mib, `single-${p.mib}-${round}.bin`),
        );
        if (single.result !== expected) {
          throw new Error(`single PUT: SHA-256 ${single.result}; the sent bytes have ${expected}`);
        }
      }
    }
    results.push({ rawWrite: raw, multipart: multipart!, single: single! });
  }
  rmSync(rawFile, { force: true });
  return { plan: p, rounds: results };
}

const growth = (m: Measurement<unknown>) => m.memory.peak - m.memory.before;

/** A section per size; the target is judged at the full size only (the quarter size is there for memory). */
function section(result: Result, judged: boolean): Section {
  const { plan: p, rounds: all } = result;
  const name = fmt.size(p.mib);
  const rate = (seconds: number) => p.mib / seconds;
  const total = (r: Round) => r.multipart.seconds;
  const medianRate = (seconds: (r: Round) => number) => fmt.rate(median(all.map((r) => rate(seconds(r)))));
  /** The median over rounds of `baseline seconds / coffer seconds` (= coffer rate / baseline rate). */
  const ratio = (baseline: (r: Round) => number, coffer: (r: Round) => number) =>
    median(all.map((r) => baseline(r) / coffer(r)));
  const toRaw = ratio((r) => r.rawWrite, total);
  const maxGrowth = Math.max(...all.map((r) => growth(r.multipart)));
  const seconds = (pick: (t: MultipartTimes) => number) => median(all.map((r) => pick(r.multipart.result)));
  const parts = `${p.parts.length} part${p.parts.length === 1 ? '' : 's'} of ${fmt.size(p.partMib)}`;
  return {
    title: `Multipart upload: ${name} in ${parts}, ${p.inFlight} in flight, ${all.length} round${all.length === 1 ? '' : 's'} (medians)`,
    rows: [
      {
        benchmark: `multipart ${name} (start → parts → complete)`,
        coffer: medianRate(total),
        baseline: `${medianRate((r) => r.rawWrite)} dd write`,
        ratio: toRaw,
        ...(judged ? { target: `≥ ${fmt.ratio(TARGET)}`, met: toRaw >= TARGET } : {}),
      },
      {
        benchmark: '  parts only (part URLs + PUTs)',
        coffer: medianRate((r) => r.multipart.result.parts),
        baseline: `${medianRate((r) => r.rawWrite)} dd write`,
        ratio: ratio(
          (r) => r.rawWrite,
          (r) => r.multipart.result.parts,
        ),
      },
      {
        benchmark: '  complete (server-side assembly)',
        coffer: `${fmt.ms(seconds((t) => t.complete) * 1000)} (${medianRate((r) => r.multipart.result.complete)})`,
        baseline: `${fmt.ms(median(all.map((r) => r.multipart.seconds)) * 1000)} total`,
        ratio: median(all.map((r) => r.multipart.result.complete / r.multipart.seconds)),
      },
      {
        benchmark: `  multipart vs single presigned PUT`,
        coffer: medianRate(total),
        baseline: `${medianRate((r) => r.single.seconds)} single PUT`,
        ratio: ratio((r) => r.single.seconds, total),
      },
      {
        benchmark: '  server RSS growth during multipart (max)',
        coffer: `+${fmt.mib(maxGrowth)}`,
        baseline: `RSS ${fmt.mib(Math.min(...all.map((r) => r.multipart.memory.before)))} before`,
        target: `< ${fmt.mib(MEMORY_LIMIT)}`,
        met: maxGrowth < MEMORY_LIMIT,
      },
    ],
    notes: [
      ...all.map((r, i) => {
        const t = r.multipart.result;
        return (
          `round ${i + 1}: dd ${fmt.rate(rate(r.rawWrite))}; multipart ${fmt.rate(rate(r.multipart.seconds))} ` +
          `(${fmt.ratio(r.rawWrite / r.multipart.seconds)}: start ${fmt.ms(t.start * 1000)}, parts ${t.parts.toFixed(2)} s, ` +
          `complete ${t.complete.toFixed(2)} s); single PUT ${fmt.rate(rate(r.single.seconds))}; ` +
          `RSS multipart ${fmt.mib(r.multipart.memory.before)}→${fmt.mib(r.multipart.memory.peak)}→${fmt.mib(r.multipart.memory.after)}, ` +
          `single ${fmt.mib(r.single.memory.before)}→${fmt.mib(r.single.memory.peak)}→${fmt.mib(r.single.memory.after)}`
        );
      }),
      `CPU per GiB (median): multipart server ${((median(all.map((r) => r.multipart.serverCpu)) / p.mib) * 1024).toFixed(2)} s, ` +
        `client ${((median(all.map((r) => r.multipart.clientCpu)) / p.mib) * 1024).toFixed(2)} s; single PUT server ` +
        `${((median(all.map((r) => r.single.serverCpu)) / p.mib) * 1024).toFixed(2)} s, client ` +
        `${((median(all.map((r) => r.single.clientCpu)) / p.mib) * 1024).toFixed(2)} s`,
      `complete takes ${fmt.ratio(median(all.map((r) => r.multipart.result.complete / r.multipart.seconds)))} of the multipart time (ratio column of its row)`,
    ],
  };
}

// ------------------------------------------------------------------------------------------------- bench

export const multipart: Bench = {
  name: 'multipart',
  description: 'multipart upload (parts in flight, complete) vs raw disk write and single PUT; server RSS',
  async run(context) {
    const { server, sizeMib, canDropCaches } = context;
    const inFlight = envInteger('COFFER_BENCH_PARTS_IN_FLIGHT', 4);
    const project = await createProject(server);
    const data = new Data();
    const smallMib = Math.max(MIN_PART_MIB, Math.floor(sizeMib / 4));
    const sizes = smallMib < sizeMib ? [smallMib, sizeMib] : [sizeMib];

    progress('warm-up: dd write of 64 MiB, multipart of 64 MiB');
    const warm = join(context.scratch, 'multipart-warm-up');
    await rawWrite(warm, 64);
    rmSync(warm, { force: true });
    await multipartUpload(project, data, plan(64, inFlight), 'multipart-warm-up.bin');

    const startRss = server.rss();
    const results: Result[] = [];
    for (const mib of sizes) results.push(await rounds(context, project, data, plan(mib, inFlight)));
    const endRss = server.rss();

    const sections = results.map((result) => section(result, result.plan.mib === sizeMib));
    const summary: Section = {
      title: 'Server memory across all multipart uploads',
      rows: [
        retainedRssRow('server RSS retained after all multipart uploads', startRss, endRss, MEMORY_LIMIT),
      ],
      notes: [
        'multipart time: from the start call to the answer of complete, on the client: start, then per part its part URL and its PUT ' +
          `(${inFlight} parts in flight), then complete, which checks the parts, renames them into place and ` +
          'finishes the SHA-256 the store computed while the parts arrived',
        'the body of every part is streamed from one 2 MiB random buffer (a 1 MiB window per MiB, never a whole part in memory); ' +
          "the SHA-256 confirmed by complete (and by the single PUT's confirm) is checked against the bytes sent",
        'single PUT: initiate + PUT of the whole object through its presigned URL + confirm, as in bench/uploads.ts',
        canDropCaches
          ? 'page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every side; sides rotate in order over rounds'
          : 'the page cache could not be dropped (not root); sides rotate in order over rounds',
        'dd baseline: if=/dev/zero bs=1M conv=fdatasync in the same filesystem; the ≥ 70% target is judged at the full size ' +
          '(the quarter size is measured for the memory comparison: writes that small often end in the disk cache)',
      ],
    };
    if (results.length === 2) {
      const [small, large] = results as [Result, Result];
      const worst = (result: Result) => Math.max(...result.rounds.map((r) => growth(r.multipart)));
      const extra = (large.plan.mib - small.plan.mib) * MiB;
      const difference = worst(large) - worst(small);
      summary.rows.push({
        benchmark: `RSS growth ${fmt.size(large.plan.mib)} vs ${fmt.size(small.plan.mib)}`,
        coffer: `+${fmt.mib(worst(large))} vs +${fmt.mib(worst(small))}`,
        baseline: `${fmt.mib(extra)} more bytes`,
        ratio: Math.max(0, difference) / extra,
        target: '≈ 0% (flat)',
        met: difference < Math.max(0.05 * extra, 16 * MiB) && worst(large) < MEMORY_LIMIT,
      });
      summary.notes.push(
        `"RSS growth … vs …": the extra peak growth at ${fmt.size(large.plan.mib)} over ${fmt.size(small.plan.mib)}, per extra byte (≈ 100% if memory grew with size); met under 5% (at least 16 MiB of slack)`,
      );
    }
    return [...sections, summary];
  },
};
