/** PUT and GET of a large object against `dd` and a bare node:http server, and the server's memory meanwhile. */
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { agent, expectStatus, type Project } from './client.ts';
import { dropCaches, rawRead, rawWrite } from './disk.ts';
import type { ReferenceServer } from './helper-servers.ts';
import { type BenchContext, MiB, progress } from './lib.ts';
import { fmt, type Measurement, measure, median } from './measure.ts';
import type { Section } from './report.ts';
import { confirm, initiate, put } from './upload-flow.ts';

const PUT_TARGET = 0.8;
const GET_TARGET = 0.85;
/** The server's RSS may grow this much while it moves a large object. */
export const MEMORY_LIMIT = 100 * MiB;

interface TransferRound {
  /** Seconds of each side: dd, Coffer (measured with the server's CPU and RSS), the minimal node:http server. */
  rawWrite: number;
  put: Measurement<void>;
  referencePut: number;
  rawRead: number;
  get: Measurement<void>;
  referenceGet: number;
}

export interface TransferResult {
  mib: number;
  rounds: TransferRound[];
}

/** `mib` times the same 1 MiB buffer: a large body without a large allocation. */
export async function* repeated(chunk: Buffer, mib: number): AsyncGenerator<Buffer> {
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

export async function transfers(
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

export function growth(measurement: Measurement<unknown>): number {
  return measurement.memory.peak - measurement.memory.before;
}

export function transferSection(result: TransferResult): Section {
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
