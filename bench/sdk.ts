/**
 * The SDK (`@coffer/client`, its Node.js entry) against the hand-written bench clients, on the same
 * Coffer server in the same run:
 *   1. a multipart upload of COFFER_BENCH_SIZE_MB (default 1 GiB) from one Buffer through
 *      `client.upload(projectId, buffer, { partSize, concurrency })`, with the part size and the parts in
 *      flight of bench/multipart.ts (16 parts, 4 in flight by default), against that bench's own client
 *      (`multipartUpload`: undici streaming each part from a 2 MiB random buffer);
 *   2. 1 KiB uploads per second through `client.upload` of a Buffer, COFFER_BENCH_CONCURRENCY (16) in
 *      flight, against the initiate + PUT + confirm loop of bench/uploads.ts.
 * Both sides upload the same bytes, and every upload's SHA-256 (multipart) or status (small) is checked.
 * Each round runs the two sides A B B A (the next round B A A B), so that a drift of the machine's speed
 * hits both alike; a side's time in a round is the mean of its two runs, and a row's ratio is the median
 * over rounds of hand-written time / SDK time (= SDK rate / hand-written rate). Whatever a side uploaded
 * is deleted (and its objects removed from the local store) right after it, outside the timing.
 *
 * Environment: COFFER_BENCH_SIZE_MB, COFFER_BENCH_ROUNDS, COFFER_BENCH_PART_MB, COFFER_BENCH_PARTS_IN_FLIGHT,
 * COFFER_BENCH_SMALL_COUNT (default 2000), COFFER_BENCH_CONCURRENCY (default 16); see bench/run.ts.
 */
import { randomBytes } from 'node:crypto';
import { type Client, createClient, type FileObject } from '@coffer/client';
import { createProject, type Project, purgeFiles } from './client.ts';
import { dropCaches } from './disk.ts';
import { type Bench, type BenchContext, envInteger, KiB, MiB, progress } from './lib.ts';
import { fmt, type Measurement, measure, median, pool } from './measure.ts';
import { Data, type MultipartTimes, multipartUpload, type Plan, plan } from './multipart.ts';
import type { Section } from './report.ts';
import { confirm, initiate, put } from './upload-flow.ts';

const CONTENT_TYPE = 'application/octet-stream';
const TARGET = 0.9;

type Side = 'hand' | 'sdk';

/** A B B A in odd rounds, B A A B in even ones. */
function order(round: number): Side[] {
  return round % 2 === 1 ? ['hand', 'sdk', 'sdk', 'hand'] : ['sdk', 'hand', 'hand', 'sdk'];
}

interface Round<T> {
  hand: Measurement<T>[];
  sdk: Measurement<T>[];
}

/** Runs the rounds: `run(side, round)` measures one side once; `after()` cleans up outside the timing. */
async function alternate<T>(
  context: BenchContext,
  what: string,
  run: (side: Side, round: number, run: number) => Promise<Measurement<T>>,
  after: () => Promise<void>,
  dropBefore: boolean,
): Promise<Round<T>[]> {
  const rounds: Round<T>[] = [];
  for (let round = 1; round <= context.rounds; round++) {
    const result: Round<T> = { hand: [], sdk: [] };
    for (const [i, side] of order(round).entries()) {
      if (dropBefore && context.canDropCaches) dropCaches();
      progress(`${what} round ${round}/${context.rounds}: ${side === 'hand' ? 'hand-written' : 'SDK'}`);
      result[side].push(await run(side, round, i));
      await after();
    }
    rounds.push(result);
  }
  return rounds;
}

const seconds = (all: Measurement<unknown>[]) => all.reduce((sum, m) => sum + m.seconds, 0) / all.length;
const cpu = (all: Measurement<unknown>[], pick: 'clientCpu' | 'serverCpu') =>
  all.reduce((sum, m) => sum + m[pick], 0) / all.length;
/** hand-written seconds / SDK seconds of a round: the SDK's rate as a share of the hand-written one. */
const ratioOf = (round: Round<unknown>) => seconds(round.hand) / seconds(round.sdk);

/** The SDK's row against the hand-written client, and a note per round; `show` formats a side's seconds. */
function comparison(benchmark: string, rounds: Round<unknown>[], show: (seconds: number) => string) {
  const ratio = median(rounds.map(ratioOf));
  return {
    row: {
      benchmark,
      coffer: show(median(rounds.map((r) => seconds(r.sdk)))),
      baseline: `${show(median(rounds.map((r) => seconds(r.hand))))} hand-written`,
      ratio,
      target: `≥ ${fmt.ratio(TARGET)}`,
      met: ratio >= TARGET,
    },
    roundNotes: rounds.map(
      (r, i) =>
        `round ${i + 1} (${order(i + 1).join(' ')}): hand-written ${r.hand.map((m) => show(m.seconds)).join(', ')}; ` +
        `SDK ${r.sdk.map((m) => show(m.seconds)).join(', ')} (${fmt.ratio(ratioOf(r))})`,
    ),
  };
}

// ------------------------------------------------------------------------------------------- multipart

/** The bytes of bench/multipart.ts's upload of `mib` MiB, whole in one Buffer (the SDK's input). */
function wholeBuffer(data: Data, mib: number): Buffer {
  const bytes = Buffer.allocUnsafe(mib * MiB);
  for (let k = 0; k < mib; k++) data.chunk(k).copy(bytes, k * MiB);
  return bytes;
}

function sdkMultipart(client: Client, project: Project, bytes: Buffer, p: Plan, name: string) {
  return client.upload(project.id, bytes, {
    filename: name,
    contentType: CONTENT_TYPE,
    partSize: p.partMib * MiB,
    concurrency: p.inFlight,
    multipartThreshold: 0,
  });
}

async function largeRows(context: BenchContext, client: Client, project: Project): Promise<Section> {
  const { server, sizeMib } = context;
  const inFlight = envInteger('COFFER_BENCH_PARTS_IN_FLIGHT', 4);
  const p = plan(sizeMib, inFlight);
  const data = new Data();
  const bytes = wholeBuffer(data, sizeMib);
  const expected = data.sha256(sizeMib);
  const purge = async () => {
    await purgeFiles(server, project);
  };

  progress('warm-up: multipart of 64 MiB, hand-written and SDK');
  const warm = plan(64, inFlight);
  await multipartUpload(project, data, warm, 'sdk-warm-up-hand.bin');
  await sdkMultipart(client, project, bytes.subarray(0, 64 * MiB), warm, 'sdk-warm-up.bin');
  await purge();

  const rounds = await alternate<MultipartTimes | FileObject>(
    context,
    `multipart ${fmt.size(sizeMib)}`,
    async (side, round, i) => {
      const name = `sdk-bench-${side}-${round}-${i}.bin`;
      if (side === 'hand') {
        const m = await measure(server, () => multipartUpload(project, data, p, name));
        const { checksum, status } = m.result;
        if (checksum !== expected || status !== 'ready')
          throw new Error(`hand-written multipart: ${status}, SHA-256 ${checksum}, sent ${expected}`);
        return m;
      }
      const m = await measure(server, () => sdkMultipart(client, project, bytes, p, name));
      const { checksum_sha256, status } = m.result;
      if (checksum_sha256 !== expected || status !== 'ready')
        throw new Error(`SDK multipart: ${status}, SHA-256 ${checksum_sha256}, sent ${expected}`);
      return m;
    },
    purge,
    true,
  );

  const name = fmt.size(sizeMib);
  const rate = (s: number) => fmt.rate(sizeMib / s);
  const perGiB = (all: Measurement<unknown>[], pick: 'clientCpu' | 'serverCpu') =>
    `${((cpu(all, pick) / sizeMib) * 1024).toFixed(2)} s`;
  const allOf = (side: Side) => rounds.flatMap((r) => r[side]);
  const parts = `${p.parts.length} parts of ${fmt.size(p.partMib)}`;
  const { row, roundNotes } = comparison(`SDK client.upload ${name} (Buffer, multipart)`, rounds, rate);
  return {
    title: `SDK multipart upload: ${name} in ${parts}, ${p.inFlight} in flight, ${rounds.length} round${rounds.length === 1 ? '' : 's'} (medians)`,
    rows: [row],
    notes: [
      ...roundNotes,
      `CPU per GiB (mean): client hand-written ${perGiB(allOf('hand'), 'clientCpu')}, SDK ${perGiB(allOf('sdk'), 'clientCpu')}; ` +
        `server with hand-written ${perGiB(allOf('hand'), 'serverCpu')}, with SDK ${perGiB(allOf('sdk'), 'serverCpu')}`,
      'hand-written: multipartUpload of bench/multipart.ts (start → per part its URL and an undici PUT streamed from a 2 MiB ' +
        'buffer → complete); SDK: client.upload of the same bytes whole in one Buffer, with the same part size and parts in flight ' +
        '(global fetch, default retries, no progress listener); the SHA-256 confirmed by complete is checked on both sides',
    ],
  };
}

// ------------------------------------------------------------------------------------------------ small

async function smallRows(context: BenchContext, client: Client, project: Project): Promise<Section> {
  const { server } = context;
  const count = envInteger('COFFER_BENCH_SMALL_COUNT', 2000);
  const concurrency = envInteger('COFFER_BENCH_CONCURRENCY', 16);
  const payload = randomBytes(KiB);

  const hand = async (name: string) => {
    const started = await initiate(project, name, payload.length);
    await put(started.upload_url, payload.length, payload);
    const file = await confirm(project, started.file_id);
    if (file.status !== 'ready') throw new Error(`hand-written confirm: the file is ${file.status}`);
  };
  const sdk = async (name: string) => {
    const file = await client.upload(project.id, payload, { filename: name, contentType: CONTENT_TYPE });
    if (file.status !== 'ready') throw new Error(`SDK upload: the file is ${file.status}`);
  };
  const upload = { hand, sdk };
  const purge = async () => {
    await purgeFiles(server, project);
  };

  progress('warm-up: 100 small uploads, hand-written and SDK');
  await pool(100, concurrency, (i) => hand(`warm-hand-${i}.bin`));
  await pool(100, concurrency, (i) => sdk(`warm-sdk-${i}.bin`));
  await purge();

  const rounds = await alternate<void>(
    context,
    `small uploads × ${count}`,
    (side, round, run) =>
      measure(
        server,
        () => pool(count, concurrency, (i) => upload[side](`small-${side}-${round}-${run}-${i}.bin`)),
        0,
      ),
    purge,
    false,
  );

  const perSecond = (s: number) => fmt.perSecond(count / s, 'uploads');
  const allOf = (side: Side) => rounds.flatMap((r) => r[side]);
  const perUpload = (side: Side, pick: 'clientCpu' | 'serverCpu') =>
    fmt.ms((cpu(allOf(side), pick) / count) * 1000);
  const { row, roundNotes } = comparison(`SDK client.upload 1 KiB × ${count}`, rounds, perSecond);
  return {
    title: `SDK small uploads (1 KiB: initiate + PUT + confirm), ${concurrency} in flight, ${rounds.length} round${rounds.length === 1 ? '' : 's'} (medians)`,
    rows: [row],
    notes: [
      ...roundNotes,
      `CPU per upload (mean): client hand-written ${perUpload('hand', 'clientCpu')}, SDK ${perUpload('sdk', 'clientCpu')}; ` +
        `server with hand-written ${perUpload('hand', 'serverCpu')}, with SDK ${perUpload('sdk', 'serverCpu')}`,
      'hand-written: initiate + undici PUT + confirm of bench/uploads.ts over its keep-alive agent; SDK: client.upload of the ' +
        'same 1 KiB Buffer (global fetch for the API calls and the PUT); every file is checked ready',
    ],
  };
}

// ------------------------------------------------------------------------------------------------- bench

export const sdk: Bench = {
  name: 'sdk',
  description: '@coffer/client uploads (1 GiB multipart, 1 KiB/s) vs the hand-written bench clients',
  async run(context) {
    const project = await createProject(context.server);
    // As an application would make it: global fetch, default retries.
    const client = createClient({ baseUrl: context.server.url, apiKey: project.key });
    return [await largeRows(context, client, project), await smallRows(context, client, project)];
  },
};
