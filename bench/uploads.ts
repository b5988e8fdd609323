/**
 * Upload and download throughput of the two-step presigned flow, and the server's memory while it moves
 * large objects:
 *   1. small uploads per second (initiate + PUT 1 KiB + confirm), against GET /health/live requests per second,
 *      B1 (one INSERT behind a bare Fastify route) and D1 (a durable 1 KiB write on the same disk);
 *   2. PUT of a large object through its presigned URL, against `dd` writing as much with fdatasync;
 *   3. GET of it through a presigned download URL, against `dd` reading the same size (cold caches when possible);
 *   4. the server's RSS before, during (peak) and after each transfer, at two sizes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdir, open, rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import {
  agent,
  type Bench,
  type BenchContext,
  call,
  createProject,
  dropCaches,
  envInteger,
  expectStatus,
  fmt,
  type InsertServer,
  KiB,
  type Measurement,
  MiB,
  machineBusySeconds,
  mean,
  measure,
  median,
  type Project,
  percentile,
  pool,
  progress,
  type ReferenceServer,
  rawRead,
  rawWrite,
  retainedRssRow,
  type Section,
  startInsertServer,
  startReference,
} from './lib.ts';

const CONTENT_TYPE = 'application/octet-stream';
const PUT_TARGET = 0.8;
const GET_TARGET = 0.85;
/** The server's RSS may grow this much while it moves a large object. */
const MEMORY_LIMIT = 100 * MiB;

interface Initiated {
  file_id: string;
  upload_url: string;
}

export async function initiate(project: Project, filename: string, size: number): Promise<Initiated> {
  const reply = await project.api<Initiated>('POST', '/files/upload', {
    filename,
    content_type: CONTENT_TYPE,
    size_bytes: size,
  });
  expectStatus(reply, 201, 'initiate');
  return reply.body;
}

export async function put(url: string, size: number, body: Buffer | Readable): Promise<void> {
  const response = await request(url, {
    method: 'PUT',
    headers: { 'content-type': CONTENT_TYPE, 'content-length': String(size) },
    body,
    dispatcher: agent,
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`PUT: expected 200, got ${response.statusCode} ${text}`);
}

export async function confirm(
  project: Project,
  fileId: string,
): Promise<{ status: string; checksum_sha256: string }> {
  const reply = await project.api('POST', `/files/${fileId}/confirm`);
  expectStatus(reply, 200, 'confirm');
  return reply.body;
}

// ----------------------------------------------------------------------------------------- small uploads

/** Targets of the small uploads, by database: uploads/s with 16 in flight, server CPU per upload. */
/** Against B1 (a bare Fastify route doing one INSERT, on the same engine): initiate, confirm and a whole upload. */
const INITIATE_TARGET = 0.6;
const CONFIRM_TARGET = 0.5;
const UPLOAD_TARGET = 0.25;
/** A 1 KiB PUT against D1 (a durable 1 KiB write on the same disk). */
const SMALL_PUT_TARGET = 0.4;

/**
 * D1, what the disk gives a PUT that answers only once its bytes are durable: `count` files of 1 KiB,
 * each written and fsynced and then its folder fsynced, `concurrency` at once, in `dir` (the data
 * directory's disk). A PUT of the local store does this at least twice (the object, its sidecar).
 */
async function durableWrites(
  dir: string,
  count: number,
  concurrency: number,
): Promise<{ rate: number; cpuMs: number }> {
  await mkdir(dir, { recursive: true });
  const body = randomBytes(KiB);
  const cpu = process.cpuUsage();
  const start = performance.now();
  await pool(count, concurrency, async (i) => {
    const file = await open(join(dir, `d1-${i}`), 'w');
    try {
      await file.write(body);
      await file.datasync();
    } finally {
      await file.close();
    }
    const folder = await open(dir, 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
  });
  const rate = count / ((performance.now() - start) / 1000);
  const used = process.cpuUsage(cpu);
  await rm(dir, { recursive: true, force: true });
  // The writes' CPU (system calls, mostly): this process does nothing else meanwhile, but for an idle
  // server when it runs here (COFFER_BENCH_SERVER=in-process).
  return { rate, cpuMs: (used.user + used.system) / 1000 / count };
}

/** One request of B1: initiate's JSON body, one INSERT behind a bare Fastify route. */
export async function insertB1(b1: InsertServer, i: number): Promise<void> {
  const body = { filename: `small-${i}.bin`, content_type: CONTENT_TYPE, size_bytes: KiB };
  expectStatus(await call('POST', `${b1.url}/files`, { body }), 201, 'B1 insert');
}

/** B1 under a load of `count` requests, `concurrency` in flight, with its own process's CPU and the machine's. */
export async function measureInserts(b1: InsertServer, count: number, concurrency: number) {
  const cpu = b1.cpuSeconds();
  const machine = machineBusySeconds();
  const start = performance.now();
  await pool(count, concurrency, (i) => insertB1(b1, i));
  return {
    rate: count / ((performance.now() - start) / 1000),
    cpu: b1.cpuSeconds() - cpu,
    machineCpu: machineBusySeconds() - machine,
  };
}

async function smallUploads(context: BenchContext, project: Project): Promise<Section> {
  const { server, db } = context;
  const count = envInteger('COFFER_BENCH_SMALL_COUNT', 2000);
  const healthCount = envInteger('COFFER_BENCH_HEALTH_COUNT', 20_000);
  const concurrency = envInteger('COFFER_BENCH_CONCURRENCY', 16);
  const payload = randomBytes(KiB);
  const steps = { initiate: [] as number[], put: [] as number[], confirm: [] as number[] };

  const upload = async (i: number, record: boolean) => {
    const t = performance.now();
    const started = await initiate(project, `small-${i}.bin`, payload.length);
    const t1 = performance.now();
    await put(started.upload_url, payload.length, payload);
    const t2 = performance.now();
    const file = await confirm(project, started.file_id);
    if (file.status !== 'ready') throw new Error(`confirm: the file is ${file.status}, not ready`);
    if (record) {
      steps.initiate.push(t1 - t);
      steps.put.push(t2 - t1);
      steps.confirm.push(performance.now() - t2);
    }
  };
  const live = async () => {
    const response = await request(`${server.url}/health/live`, { dispatcher: agent });
    await response.body.dump();
    if (response.statusCode !== 200) throw new Error(`/health/live: ${response.statusCode}`);
  };
  const b1 = await startInsertServer(join(context.scratch, 'b1'));
  const measureB1 = () => measureInserts(b1, count, concurrency);

  try {
    progress('warm-up: 100 small uploads, 1000 GET /health/live, 500 B1 inserts');
    await pool(100, concurrency, (i) => upload(-1 - i, false));
    await pool(1000, concurrency, live);
    await pool(500, concurrency, (i) => insertB1(b1, i));

    progress(`GET /health/live × ${healthCount}, ${concurrency} in flight`);
    const health = await measure(server, () => pool(healthCount, concurrency, live), 0);
    // B1 before and after Coffer's steps: a drift of the machine's load hits both sides alike.
    progress(`B1 (bare Fastify + one INSERT) × ${count}, ${concurrency} in flight`);
    const b1Before = await measureB1();
    progress(`D1 (durable 1 KiB writes) × ${count}, ${concurrency} in flight`);
    const d1 = await durableWrites(join(context.scratch, 'd1'), count, concurrency);
    progress(`steps apart: initiate × ${count}, PUT × ${count}, confirm × ${count}`);
    const started: Initiated[] = new Array(count);
    const initiates = await measure(
      server,
      () =>
        pool(count, concurrency, async (i) => {
          started[i] = await initiate(project, `step-${i}.bin`, payload.length);
        }),
      0,
    );
    const puts = await measure(
      server,
      () => pool(count, concurrency, (i) => put(started[i]!.upload_url, payload.length, payload)),
      0,
    );
    const confirms = await measure(
      server,
      () =>
        pool(count, concurrency, async (i) => {
          const file = await confirm(project, started[i]!.file_id);
          if (file.status !== 'ready') throw new Error(`confirm: the file is ${file.status}, not ready`);
        }),
      0,
    );
    progress(`small uploads × ${count}, ${concurrency} in flight`);
    const uploads = await measure(server, () => pool(count, concurrency, (i) => upload(i, true)), 0);
    progress(`B1 × ${count} again`);
    const b1After = await measureB1();

    const rate = (m: { seconds: number }) => count / m.seconds;
    const b1Rate = (b1Before.rate + b1After.rate) / 2;
    const healthRate = healthCount / health.seconds;
    const uploadRate = rate(uploads);
    const cpuMs = (m: { serverCpu: number }) => (m.serverCpu / count) * 1000;
    const machineMs = (m: { machineCpu: number }) => (m.machineCpu / count) * 1000;
    /** B1's CPU per insert in ms, the mean of its two runs: its own process's, or the machine's. */
    const b1Ms = (of: 'cpu' | 'machineCpu') => ((b1Before[of] + b1After[of]) / 2 / count) * 1000;
    const uploadCpu = cpuMs(uploads);
    const b1Label = `${fmt.perSecond(b1Rate, 'req')} B1`;
    const step = (name: keyof typeof steps) =>
      `${name} ${fmt.ms(mean(steps[name]))} mean / ${fmt.ms(percentile(steps[name], 95))} p95`;
    return {
      title: `Small uploads (1 KiB: initiate + PUT + confirm), ${concurrency} in flight, ${db === 'pglite' ? 'embedded PGlite' : 'PostgreSQL'}`,
      rows: [
        { benchmark: 'GET /health/live (reference)', coffer: fmt.perSecond(healthRate, 'req') },
        {
          benchmark: `B1: bare Fastify route, one INSERT (${db === 'pglite' ? 'PGlite' : 'pg'})`,
          coffer: fmt.perSecond(b1Rate, 'req'),
          baseline: `${fmt.perSecond(healthRate, 'req')} live`,
          ratio: b1Rate / healthRate,
        },
        {
          benchmark: `initiate × ${count}`,
          coffer: fmt.perSecond(rate(initiates), 'req'),
          baseline: b1Label,
          ratio: rate(initiates) / b1Rate,
          target: `≥ ${fmt.ratio(INITIATE_TARGET)}`,
          met: rate(initiates) / b1Rate >= INITIATE_TARGET,
        },
        {
          benchmark: 'D1: durable 1 KiB write (file and folder fsynced)',
          coffer: `${fmt.perSecond(d1.rate, 'write')}, ${fmt.ms(d1.cpuMs)} CPU each`,
          baseline: b1Label,
          ratio: d1.rate / b1Rate,
        },
        {
          benchmark: `PUT 1 KiB × ${count}`,
          coffer: fmt.perSecond(rate(puts), 'req'),
          baseline: `${fmt.perSecond(d1.rate, 'write')} D1`,
          ratio: rate(puts) / d1.rate,
          target: `≥ ${fmt.ratio(SMALL_PUT_TARGET)}`,
          met: rate(puts) / d1.rate >= SMALL_PUT_TARGET,
        },
        {
          benchmark: `confirm × ${count}`,
          coffer: fmt.perSecond(rate(confirms), 'req'),
          baseline: b1Label,
          ratio: rate(confirms) / b1Rate,
          target: `≥ ${fmt.ratio(CONFIRM_TARGET)}`,
          met: rate(confirms) / b1Rate >= CONFIRM_TARGET,
        },
        {
          benchmark: `small uploads × ${count}`,
          coffer: fmt.perSecond(uploadRate, 'uploads'),
          baseline: b1Label,
          ratio: uploadRate / b1Rate,
          target: `≥ ${fmt.ratio(UPLOAD_TARGET)}`,
          met: uploadRate / b1Rate >= UPLOAD_TARGET,
        },
        {
          benchmark: '  server CPU per upload',
          coffer: fmt.ms(uploadCpu),
          value: uploadCpu,
          unit: 'ms',
          baseline: `${fmt.ms(b1Ms('cpu'))} B1 per insert`,
        },
        {
          // What binds once the two CPUs are busy: everything an upload costs, the database included.
          benchmark: '  machine CPU per upload (every process)',
          coffer: fmt.ms(machineMs(uploads)),
          baseline: `${fmt.ms(b1Ms('machineCpu'))} per B1 insert`,
          ratio: machineMs(uploads) / b1Ms('machineCpu'),
        },
      ],
      notes: [
        `B1 ${fmt.perSecond(b1Before.rate, 'req')} before Coffer's steps and ${fmt.perSecond(b1After.rate, 'req')} after; the ratios use their mean`,
        `machine busy ${((uploads.machineCpu / uploads.seconds / cpus().length) * 100).toFixed(0)}% of its ${cpus().length} CPUs during the whole uploads; per upload: server ${fmt.ms(uploadCpu)}, client ${fmt.ms((uploads.clientCpu / count) * 1000)}, the rest (the database, the kernel, anything else) ${fmt.ms(machineMs(uploads) - uploadCpu - (uploads.clientCpu / count) * 1000)}`,
        `machine CPU per request (every process): initiate ${fmt.ms(machineMs(initiates))}, PUT ${fmt.ms(machineMs(puts))}, confirm ${fmt.ms(machineMs(confirms))}, B1 insert ${fmt.ms(b1Ms('machineCpu'))}`,
        `server CPU per request: initiate ${fmt.ms(cpuMs(initiates))}, PUT ${fmt.ms(cpuMs(puts))}, confirm ${fmt.ms(cpuMs(confirms))}, /health/live ${fmt.ms((health.serverCpu / healthCount) * 1000)}; client CPU per upload ${fmt.ms((uploads.clientCpu / count) * 1000)}`,
        `latency per step of a whole upload: ${step('initiate')}; ${step('put')}; ${step('confirm')}`,
        `server RSS ${fmt.mib(uploads.memory.before)} before the uploads, ${fmt.mib(uploads.memory.peak)} peak, ${fmt.mib(uploads.memory.after)} after`,
        "D1: files of 1 KiB written, fsynced and their folder fsynced from this process, on the data directory's disk: a PUT answers only once its object and its sidecar are durable (two such writes, some of their fsyncs batched by the disk), so the disk alone would bound PUTs near half of D1",
        'B1 (bench/insert-server.ts): the same JSON body as initiate, one INSERT into a table as wide as `files` (primary key only), in a process of its own; Coffer runs the same load against initiate and confirm apart, then whole uploads',
      ],
    };
  } finally {
    await b1.close();
  }
}

// ------------------------------------------------------------------------------------- large transfers

interface TransferRound {
  /** Seconds of each side: dd, Coffer (measured with the server's CPU and RSS), the minimal node:http server. */
  rawWrite: number;
  put: Measurement<void>;
  referencePut: number;
  rawRead: number;
  get: Measurement<void>;
  referenceGet: number;
}

interface TransferResult {
  mib: number;
  rounds: TransferRound[];
}

/** `mib` times the same 1 MiB buffer: a large body without a large allocation. */
async function* repeated(chunk: Buffer, mib: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < mib; i++) yield chunk;
}

function sha256Of(chunk: Buffer, mib: number): string {
  const hash = createHash('sha256');
  for (let i = 0; i < mib; i++) hash.update(chunk);
  return hash.digest('hex');
}

/** GETs `url` and discards the body, checking its length. */
async function drain(url: string, size: number): Promise<void> {
  const response = await request(url, { dispatcher: agent });
  let received = 0;
  for await (const part of response.body) received += (part as Buffer).length;
  if (response.statusCode !== 200 || received !== size) {
    throw new Error(`GET ${url}: status ${response.statusCode}, ${received} of ${size} bytes`);
  }
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await work();
  return (performance.now() - start) / 1000;
}

type Side = 'raw' | 'coffer' | 'reference';
const SIDES: Side[] = ['raw', 'coffer', 'reference'];

async function transfers(
  context: BenchContext,
  project: Project,
  reference: ReferenceServer,
  chunk: Buffer,
  mib: number,
): Promise<TransferResult> {
  const { server, scratch, rounds, canDropCaches } = context;
  const size = mib * MiB;
  const rawFile = join(scratch, `raw-${mib}`);
  const expected = sha256Of(chunk, mib);
  const body = () => Readable.from(repeated(chunk, mib), { objectMode: false });
  const results: TransferRound[] = [];

  for (let round = 1; round <= rounds; round++) {
    // Each round starts with another side, so that drifts of the disk's speed hit all sides alike.
    const order = SIDES.map((_, i) => SIDES[(i + round - 1) % SIDES.length]!);
    const step = (side: Side, what: string) => {
      if (canDropCaches) dropCaches();
      progress(`${fmt.size(mib)} round ${round}/${rounds}: ${what} (${side})`);
    };
    const started = await initiate(project, `large-${mib}-${round}.bin`, size);
    const referenceName = `large-${mib}-${round}`;
    const referenceUrl = `${reference.url}/${referenceName}`;

    let rawWriteSeconds = 0;
    let putMeasurement: Measurement<void> | undefined;
    let referencePut = 0;
    for (const side of order) {
      step(side, 'write');
      if (side === 'raw') {
        rmSync(rawFile, { force: true });
        rawWriteSeconds = await rawWrite(rawFile, mib);
      } else if (side === 'coffer') {
        putMeasurement = await measure(server, () => put(started.upload_url, size, body()));
      } else {
        referencePut = await timed(async () => {
          const response = await request(referenceUrl, {
            method: 'PUT',
            headers: { 'content-length': String(size) },
            body: body(),
            dispatcher: agent,
          });
          const answer = (await response.body.json()) as { sha256: string };
          if (response.statusCode !== 200 || answer.sha256 !== expected) {
            throw new Error(`reference PUT: ${response.statusCode} ${JSON.stringify(answer)}`);
          }
        });
      }
    }
    const file = await confirm(project, started.file_id);
    if (file.checksum_sha256 !== expected) {
      throw new Error(`the stored object's SHA-256 ${file.checksum_sha256} is not the sent ${expected}`);
    }
    const download = await project.api<{ url: string }>('GET', `/files/${started.file_id}/download`);
    expectStatus(download, 200, 'download URL');

    let rawReadSeconds = 0;
    let getMeasurement: Measurement<void> | undefined;
    let referenceGet = 0;
    for (const side of order) {
      step(side, 'read');
      if (side === 'raw') rawReadSeconds = await rawRead(rawFile);
      else if (side === 'coffer')
        getMeasurement = await measure(server, () => drain(download.body.url, size));
      else referenceGet = await timed(() => drain(referenceUrl, size));
    }
    rmSync(join(reference.dir, referenceName), { force: true });
    results.push({
      rawWrite: rawWriteSeconds,
      put: putMeasurement!,
      referencePut,
      rawRead: rawReadSeconds,
      get: getMeasurement!,
      referenceGet,
    });
  }
  rmSync(rawFile, { force: true });
  return { mib, rounds: results };
}

function growth(measurement: Measurement<unknown>): number {
  return measurement.memory.peak - measurement.memory.before;
}

function transferSection(result: TransferResult): Section {
  const { mib, rounds } = result;
  const name = fmt.size(mib);
  const rate = (seconds: number) => mib / seconds;
  const medianRate = (seconds: (r: TransferRound) => number) =>
    fmt.rate(median(rounds.map((r) => rate(seconds(r)))));
  /** The median over rounds of `baseline seconds / coffer seconds` (= coffer rate / baseline rate). */
  const ratio = (baseline: (r: TransferRound) => number, coffer: (r: TransferRound) => number) =>
    median(rounds.map((r) => baseline(r) / coffer(r)));
  const putRatio = ratio(
    (r) => r.rawWrite,
    (r) => r.put.seconds,
  );
  const getRatio = ratio(
    (r) => r.rawRead,
    (r) => r.get.seconds,
  );
  const memory = (kind: 'PUT' | 'GET', all: Measurement<unknown>[]) => {
    const max = Math.max(...all.map(growth));
    return {
      benchmark: `  server RSS growth during ${kind} (max of rounds)`,
      coffer: `+${fmt.mib(max)}`,
      baseline: `RSS ${fmt.mib(Math.min(...all.map((m) => m.memory.before)))} before`,
      target: `< ${fmt.mib(MEMORY_LIMIT)}`,
      met: max < MEMORY_LIMIT,
    };
  };
  const cpu = (kind: 'PUT' | 'GET', all: Measurement<unknown>[]) =>
    `${kind} CPU per GiB (median): Coffer server ${((median(all.map((m) => m.serverCpu)) / mib) * 1024).toFixed(2)} s, ` +
    `client ${((median(all.map((m) => m.clientCpu)) / mib) * 1024).toFixed(2)} s`;
  const perRound = rounds.map(
    (r, i) =>
      `round ${i + 1}: write dd ${fmt.rate(rate(r.rawWrite))} / Coffer ${fmt.rate(rate(r.put.seconds))} (${fmt.ratio(r.rawWrite / r.put.seconds)}) / ` +
      `node:http ${fmt.rate(rate(r.referencePut))}; read dd ${fmt.rate(rate(r.rawRead))} / Coffer ${fmt.rate(rate(r.get.seconds))} ` +
      `(${fmt.ratio(r.rawRead / r.get.seconds)}) / node:http ${fmt.rate(rate(r.referenceGet))}; ` +
      `RSS PUT ${fmt.mib(r.put.memory.before)}→${fmt.mib(r.put.memory.peak)}→${fmt.mib(r.put.memory.after)}, ` +
      `GET ${fmt.mib(r.get.memory.before)}→${fmt.mib(r.get.memory.peak)}→${fmt.mib(r.get.memory.after)}`,
  );
  return {
    title: `Large object through presigned URLs: ${name}, ${rounds.length} round${rounds.length === 1 ? '' : 's'} (medians)`,
    rows: [
      {
        benchmark: `PUT ${name}`,
        coffer: medianRate((r) => r.put.seconds),
        baseline: `${medianRate((r) => r.rawWrite)} dd write`,
        ratio: putRatio,
        target: `≥ ${fmt.ratio(PUT_TARGET)}`,
        met: putRatio >= PUT_TARGET,
      },
      {
        benchmark: `  PUT ${name} vs minimal node:http`,
        coffer: medianRate((r) => r.put.seconds),
        baseline: `${medianRate((r) => r.referencePut)} node:http`,
        ratio: ratio(
          (r) => r.referencePut,
          (r) => r.put.seconds,
        ),
      },
      memory(
        'PUT',
        rounds.map((r) => r.put),
      ),
      {
        benchmark: `GET ${name}`,
        coffer: medianRate((r) => r.get.seconds),
        baseline: `${medianRate((r) => r.rawRead)} dd read`,
        ratio: getRatio,
        target: `≥ ${fmt.ratio(GET_TARGET)}`,
        met: getRatio >= GET_TARGET,
      },
      {
        benchmark: `  GET ${name} vs minimal node:http`,
        coffer: medianRate((r) => r.get.seconds),
        baseline: `${medianRate((r) => r.referenceGet)} node:http`,
        ratio: ratio(
          (r) => r.referenceGet,
          (r) => r.get.seconds,
        ),
      },
      memory(
        'GET',
        rounds.map((r) => r.get),
      ),
    ],
    notes: [
      ...perRound,
      `${cpu(
        'PUT',
        rounds.map((r) => r.put),
      )}; ${cpu(
        'GET',
        rounds.map((r) => r.get),
      )}`,
      `minimal node:http reaches ${fmt.ratio(
        ratio(
          (r) => r.rawWrite,
          (r) => r.referencePut,
        ),
      )} of dd on writes and ${fmt.ratio(
        ratio(
          (r) => r.rawRead,
          (r) => r.referenceGet,
        ),
      )} on reads: the ceiling of loopback HTTP in Node.js on this machine`,
    ],
  };
}

// ------------------------------------------------------------------------------------------------- bench

export const uploads: Bench = {
  name: 'uploads',
  description: 'small uploads/s; large PUT and GET through presigned URLs vs raw disk; server RSS',
  async run(context) {
    const { server, sizeMib, canDropCaches } = context;
    const project = await createProject(server);
    const sections: Section[] = [await smallUploads(context, project)];

    const chunk = randomBytes(MiB);
    const smallMib = Math.max(1, Math.floor(sizeMib / 4));
    const sizes = smallMib < sizeMib ? [smallMib, sizeMib] : [sizeMib];
    const reference = await startReference(join(context.scratch, 'reference'));
    const results: TransferResult[] = [];
    let startRss: number;
    try {
      // A discarded write first: this VM's disk is markedly slower on the first write after idling.
      progress('warm-up: dd write of 64 MiB, PUT of 64 MiB');
      const warm = join(context.scratch, 'warm-up');
      await rawWrite(warm, 64);
      rmSync(warm, { force: true });
      startRss = server.rss();
      const warmUp = await initiate(project, 'warm-up.bin', 64 * MiB);
      await put(warmUp.upload_url, 64 * MiB, Readable.from(repeated(chunk, 64), { objectMode: false }));
      for (const mib of sizes) results.push(await transfers(context, project, reference, chunk, mib));
    } finally {
      await reference.close();
    }
    const endRss = server.rss();
    for (const result of results) sections.push(transferSection(result));

    const summary: Section = {
      title: 'Server memory across all large transfers',
      rows: [retainedRssRow('server RSS retained after all transfers', startRss, endRss, MEMORY_LIMIT)],
      notes: [
        server.mode === 'child'
          ? `RSS is the Coffer server process's (pid ${server.pid}), read from /proc/<pid>/status; peak = max of 10 ms samples and VmHWM (reset through clear_refs before each transfer)`
          : 'in-process mode: RSS and CPU are the whole process (server and client together), so "server" and "client" CPU show the same figure',
        canDropCaches
          ? 'page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every write and every read, on every side'
          : 'the page cache could not be dropped (not root): reads on every side may be warm',
        'dd baselines: bs=1M in the same filesystem (write: if=/dev/zero conv=fdatasync; read: of=/dev/null); a Coffer PUT answers only after its own fsync',
        'minimal node:http: bench/reference-server.ts in its own process, hashing (SHA-256) and fsyncing as Coffer does, without framework, signature checks, database or sidecar',
      ],
    };
    if (results.length === 2) {
      const [small, large] = results as [TransferResult, TransferResult];
      const worst = (result: TransferResult) =>
        Math.max(...result.rounds.flatMap((r) => [growth(r.put), growth(r.get)]));
      const extra = (large.mib - small.mib) * MiB;
      const difference = worst(large) - worst(small);
      summary.rows.push({
        benchmark: `RSS growth ${fmt.size(large.mib)} vs ${fmt.size(small.mib)}`,
        coffer: `+${fmt.mib(worst(large))} vs +${fmt.mib(worst(small))}`,
        baseline: `${fmt.mib(extra)} more bytes`,
        ratio: Math.max(0, difference) / extra,
        target: '≈ 0% (flat)',
        met: difference < Math.max(0.05 * extra, 16 * MiB) && worst(large) < MEMORY_LIMIT,
      });
      summary.notes.push(
        `"RSS growth … vs …": the extra peak growth at ${fmt.size(large.mib)} over ${fmt.size(small.mib)}, per extra byte moved (≈ 100% if memory grew with size); met when under 5% of the extra bytes (at least 16 MiB of slack)`,
      );
    }
    sections.push(summary);
    return sections;
  },
};
