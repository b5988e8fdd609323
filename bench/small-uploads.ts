/** Small uploads per second against B1 (one INSERT behind a bare route) and D1 (a durable 1 KiB write). */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { agent, call, expectStatus, type Project } from './client.ts';
import { type InsertServer, startInsertServer } from './helper-servers.ts';
import { type BenchContext, envInteger, KiB, progress } from './lib.ts';
import { fmt, mean, measure, percentile, pool } from './measure.ts';
import { machineBusySeconds } from './proc.ts';
import type { Section } from './report.ts';
import { CONTENT_TYPE, confirm, type Initiated, initiate, put } from './upload-flow.ts';

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

export async function smallUploads(context: BenchContext, project: Project): Promise<Section> {
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
