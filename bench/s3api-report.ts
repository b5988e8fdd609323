/**
 * The tables of bench/s3api.ts: what it measured, against which baseline, and whether each target held.
 */
import { type BenchContext, MiB } from './lib.ts';
import { fmt, median, percentile } from './measure.ts';
import type { Row, Section } from './report.ts';
import type { Plan, Side } from './s3-server.ts';

const B1_TARGET = 0.5;
const RGW_TARGET = 1;
const MULTIPART_TARGET = 0.9;
const LIST_TARGET_MS = 50;
/** Keys a ListObjectsV2 page asks for (S3's most). */
export const PAGE_KEYS = 1000;

/** One round of PutObject and GetObject of 1 KiB: each side's rate (the mean of its two runs). */
export interface SmallRound {
  put: Record<Side, number>;
  get: Record<Side, number>;
  serverCpu: { put: number; get: number };
}

export interface SmallResult {
  count: number;
  concurrency: number;
  rounds: SmallRound[];
}

/**
 * One round of the large object: seconds of each side's upload and download (means of two runs), and
 * of dd writing as many bytes to the disk of Coffer's store with one fdatasync (before and after, mean).
 */
export interface MultipartRound {
  disk: number;
  up: Record<Side, number>;
  down: Record<Side, number>;
}

export const dbName = (c: BenchContext) => (c.db === 'pglite' ? 'embedded PGlite' : 'PostgreSQL');
const rows = (n: number) => `${n} round${n === 1 ? '' : 's'}`;

export function smallSection(
  c: BenchContext,
  small: SmallResult,
  rest: { b1: number; rest: number },
): Section {
  const { rounds, count, concurrency } = small;
  const med = (pick: (r: SmallRound) => number) => median(rounds.map(pick));
  const rate = (value: number) => fmt.perSecond(value, 'req');
  const put = med((r) => r.put.coffer);
  const vsRgw = (op: 'put' | 'get') => med((r) => r[op].coffer / r[op].sdk);
  const putVsRgw = vsRgw('put');
  const getVsRgw = vsRgw('get');
  return {
    title: `S3 API: 1 KiB objects through /s3, @aws-sdk/client-s3, ${concurrency} in flight, ${count} per run, ${dbName(c)}, ${rows(rounds.length)} (medians)`,
    rows: [
      { benchmark: `B1: bare Fastify route, one INSERT`, coffer: rate(rest.b1) },
      {
        benchmark: 'REST small upload (initiate + PUT + confirm)',
        coffer: fmt.perSecond(rest.rest, 'uploads'),
        baseline: `${rate(rest.b1)} B1`,
        ratio: rest.rest / rest.b1,
      },
      {
        benchmark: 'PutObject 1 KiB vs B1',
        coffer: rate(put),
        baseline: `${rate(rest.b1)} B1`,
        ratio: put / rest.b1,
        target: `≥ ${fmt.ratio(B1_TARGET)}`,
        met: put / rest.b1 >= B1_TARGET,
      },
      {
        benchmark: 'PutObject 1 KiB vs radosgw',
        coffer: rate(put),
        baseline: `${rate(med((r) => r.put.sdk))} radosgw`,
        ratio: putVsRgw,
        target: `≥ ${fmt.ratio(RGW_TARGET)}`,
        met: putVsRgw >= RGW_TARGET,
      },
      {
        benchmark: 'GetObject 1 KiB vs radosgw',
        coffer: rate(med((r) => r.get.coffer)),
        baseline: `${rate(med((r) => r.get.sdk))} radosgw`,
        ratio: getVsRgw,
        target: `≥ ${fmt.ratio(RGW_TARGET)}`,
        met: getVsRgw >= RGW_TARGET,
      },
      {
        benchmark: '  server CPU per PutObject / GetObject',
        coffer: `${fmt.ms(med((r) => r.serverCpu.put))} / ${fmt.ms(med((r) => r.serverCpu.get))}`,
        value: med((r) => r.serverCpu.put),
        unit: 'ms',
      },
    ],
    notes: [
      ...rounds.map(
        (r, i) =>
          `round ${i + 1}: PutObject ${rate(r.put.coffer)} vs ${rate(r.put.sdk)} radosgw, GetObject ${rate(r.get.coffer)} vs ${rate(r.get.sdk)}`,
      ),
      'both sides: the same S3Client configuration (path-style, checksums only where required), one PutObject or GetObject ' +
        'per key, new keys every run under one prefix; Coffer on its local store (each PutObject durable on disk), radosgw on a memstore OSD (RAM)',
      "B1 is bench/uploads.ts's, measured before and after the REST small uploads (their mean); the REST small upload is " +
        "bench/uploads.ts's upload on this server",
    ],
  };
}

export function multipartSection(mib: number, p: Plan, rounds: MultipartRound[]): Section {
  const size = fmt.size(mib);
  const row = (op: 'up' | 'down', name: string): Row => {
    const ratio = median(rounds.map((r) => r[op].sdk / r[op].coffer));
    return {
      benchmark: name,
      coffer: fmt.rate(mib / median(rounds.map((r) => r[op].coffer))),
      baseline: `${fmt.rate(mib / median(rounds.map((r) => r[op].sdk)))} radosgw`,
      ratio,
      target: `≥ ${fmt.ratio(MULTIPART_TARGET)}`,
      met: ratio >= MULTIPART_TARGET,
    };
  };
  return {
    title: `S3 API: multipart ${size} in ${p.parts.length} parts of ${fmt.size(p.partBytes / MiB)}, ${p.inFlight} in flight, then one GetObject, ${rows(rounds.length)} (medians)`,
    rows: [
      row('up', `multipart upload ${size} (create, parts, complete)`),
      {
        benchmark: '  the same upload vs dd to its disk (the bound of a durable store)',
        coffer: fmt.rate(mib / median(rounds.map((r) => r.up.coffer))),
        baseline: `${fmt.rate(mib / median(rounds.map((r) => r.disk)))} dd write`,
        ratio: median(rounds.map((r) => r.disk / r.up.coffer)),
      },
      row('down', `GetObject ${size} (one stream)`),
    ],
    notes: [
      ...rounds.map(
        (r, i) =>
          `round ${i + 1}: upload ${r.up.coffer.toFixed(2)} s vs ${r.up.sdk.toFixed(2)} s radosgw, download ${r.down.coffer.toFixed(2)} s vs ${r.down.sdk.toFixed(2)} s; dd ${r.disk.toFixed(2)} s`,
      ),
      "Coffer's parts are fsynced before each answers; radosgw's memstore OSD keeps them in RAM: radosgw's rate over dd's is how far above the disk a durable store would have to go",
    ],
  };
}

export function listingSection(
  files: number,
  seeded: { seconds: number },
  head: number[],
  first: number[],
  pages: { times: number[]; keys: number },
): Section {
  const stat = (times: number[]) => `${fmt.ms(percentile(times, 50))} / ${fmt.ms(percentile(times, 99))}`;
  const baseline = `${fmt.ms(percentile(head, 99))} p99 HeadBucket`;
  const row = (name: string, times: number[]): Row => {
    const p99 = percentile(times, 99);
    return {
      benchmark: name,
      coffer: stat(times),
      value: p99,
      unit: 'ms p99',
      baseline,
      target: `p99 ≤ ${LIST_TARGET_MS} ms`,
      met: p99 <= LIST_TARGET_MS,
    };
  };
  return {
    title: `S3 API: ListObjectsV2 (max-keys ${PAGE_KEYS}) on a bucket of ${files.toLocaleString('en')} files (p50 / p99)`,
    rows: [
      {
        benchmark: 'HeadBucket (reference)',
        coffer: stat(head),
        value: percentile(head, 99),
        unit: 'ms p99',
      },
      row(`first page × ${first.length}`, first),
      row(`every page of a walk (${pages.times.length} pages)`, pages.times),
    ],
    notes: [
      `seeded by bench/list-seed.ts in ${seeded.seconds.toFixed(1)} s; the walk listed ${pages.keys.toLocaleString('en')} keys (the files S3 shows: ready, not deleted)`,
      'one request at a time through the SDK; the reference is the same client authenticating a HeadBucket',
    ],
  };
}
