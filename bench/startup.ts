/**
 * Start-up and idle memory of a Coffer server, against the minimal node:http server of bench/reference-server.ts
 * (what Node.js itself takes to start and to hold):
 *   1. a first start on an empty data directory (the embedded database created, every migration applied),
 *      timed from the spawn to the first 200 of /health/ready, then its resident memory once idle;
 *   2. COFFER_BENCH_ROUNDS restarts on that data directory (the usual start of a server), the same;
 *   3. embedded only: the same database held open by a bare Node.js process, its idle RSS (what PGlite
 *      alone keeps resident, against the whole server's), plain and with the malloc thresholds `serve`
 *      starts itself with.
 * "Idle" is once the RSS has settled: sampled every 250 ms until it moved less than 1 MiB in 2 s (at
 * most 30 s), so that work still running after the start (compilation, caches) is counted in.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MALLOC_THRESHOLDS } from '../src/lean-process.ts';
import { type CofferServer, startCoffer } from './coffer-server.ts';
import { startEmbeddedIdle, startReference } from './helper-servers.ts';
import { type Bench, MiB, progress } from './lib.ts';
import { fmt, median } from './measure.ts';
import type { Section } from './report.ts';

const START_TARGET_SECONDS = 1.5;
/** The embedded server's idle RSS at most (PostgreSQL keeps the database in another process). */
const EMBEDDED_RSS_TARGET = 250 * MiB;

/** The RSS once it stopped moving: every 250 ms, until it moved < 1 MiB over 2 s, or 30 s passed. */
async function settledRss(rss: () => number): Promise<number> {
  const samples: number[] = [];
  const deadline = performance.now() + 30_000;
  for (;;) {
    samples.push(rss());
    const window = samples.slice(-9);
    if (window.length === 9 && Math.max(...window) - Math.min(...window) < MiB) return window.at(-1)!;
    if (performance.now() > deadline) return samples.at(-1)!;
    await sleep(250);
  }
}

interface Start {
  seconds: number;
  rss: number;
}

async function startOnce(dataDir: string, server: CofferServer['mode']): Promise<Start> {
  const coffer = await startCoffer(dataDir, server);
  try {
    return { seconds: coffer.startSeconds, rss: await settledRss(() => coffer.rss()) };
  } finally {
    await coffer.close();
  }
}

export const startup: Bench = {
  name: 'startup',
  description:
    'start-up to /health/ready and idle RSS, first start and restarts, vs a minimal node:http server',
  async run(context) {
    const { db, rounds, scratch } = context;
    const dir = join(scratch, 'startup');
    const mode = context.server.mode;
    if (mode !== 'child') {
      return [
        {
          title: 'Start-up and idle memory',
          rows: [],
          notes: ['skipped: only measured with the server in a child process (COFFER_BENCH_SERVER=child)'],
        },
      ];
    }

    progress('startup: minimal node:http server');
    const referenceStart = performance.now();
    const reference = await startReference(join(dir, 'reference'));
    const referenceSeconds = (performance.now() - referenceStart) / 1000;
    const referenceRss = await settledRss(() => reference.rss());
    await reference.close();

    progress('startup: first start on an empty data directory');
    const dataDir = join(dir, 'data');
    const first = await startOnce(dataDir, mode);
    const restarts: Start[] = [];
    for (let round = 1; round <= rounds; round++) {
      progress(`startup: restart ${round}/${rounds}`);
      restarts.push(await startOnce(dataDir, mode));
    }
    let pgliteRss: number | undefined;
    let pgliteTunedRss: number | undefined;
    if (db === 'pglite') {
      progress('startup: the embedded database alone, held by a bare process');
      const alone = await startEmbeddedIdle(dataDir);
      pgliteRss = await settledRss(() => alone.rss());
      await alone.close();
      progress("startup: the same, with the server's malloc thresholds");
      const tuned = await startEmbeddedIdle(dataDir, MALLOC_THRESHOLDS);
      pgliteTunedRss = await settledRss(() => tuned.rss());
      await tuned.close();
    }
    const restartSeconds = median(restarts.map((start) => start.seconds));
    const restartRss = median(restarts.map((start) => start.rss));
    const embedded = db === 'pglite';
    const rssTarget = embedded
      ? { target: `≤ ${fmt.mib(EMBEDDED_RSS_TARGET)}`, met: restartRss <= EMBEDDED_RSS_TARGET }
      : {};
    const seconds = (value: number) => `${value.toFixed(2)} s`;
    const section: Section = {
      title: `Start-up and idle memory, ${embedded ? 'embedded PGlite' : 'PostgreSQL'} (${rounds} restart${rounds === 1 ? '' : 's'}, medians)`,
      rows: [
        {
          benchmark: 'start-up to /health/ready, first start',
          coffer: seconds(first.seconds),
          value: first.seconds,
          unit: 's',
          baseline: `${seconds(referenceSeconds)} node:http`,
          target: `≤ ${seconds(START_TARGET_SECONDS)}`,
          met: first.seconds <= START_TARGET_SECONDS,
        },
        {
          benchmark: 'start-up to /health/ready, restart',
          coffer: seconds(restartSeconds),
          value: restartSeconds,
          unit: 's',
          baseline: `${seconds(referenceSeconds)} node:http`,
          target: `≤ ${seconds(START_TARGET_SECONDS)}`,
          met: restartSeconds <= START_TARGET_SECONDS,
        },
        {
          benchmark: 'idle RSS after the first start',
          coffer: fmt.mib(first.rss),
          baseline: `${fmt.mib(referenceRss)} node:http`,
          ratio: first.rss / referenceRss,
          ...(embedded ? { target: rssTarget.target, met: first.rss <= EMBEDDED_RSS_TARGET } : {}),
        },
        {
          benchmark: 'idle RSS after a restart',
          coffer: fmt.mib(restartRss),
          baseline: `${fmt.mib(referenceRss)} node:http`,
          ratio: restartRss / referenceRss,
          ...rssTarget,
        },
        ...(pgliteRss === undefined
          ? []
          : [
              {
                benchmark: 'idle RSS of the embedded database alone (a bare process)',
                coffer: fmt.mib(pgliteRss),
                baseline: `${fmt.mib(restartRss)} the restarted server`,
                ratio: pgliteRss / restartRss,
              },
            ]),
        ...(pgliteTunedRss === undefined
          ? []
          : [
              {
                benchmark: "the same, with the server's malloc thresholds",
                coffer: fmt.mib(pgliteTunedRss),
                baseline: `${fmt.mib(restartRss)} the restarted server`,
                ratio: pgliteTunedRss / restartRss,
              },
            ]),
      ],
      notes: [
        `per restart: ${restarts.map((start) => `${seconds(start.seconds)} / ${fmt.mib(start.rss)}`).join('; ')}`,
        'timed from the spawn of `src/main.ts serve` (API and workers) to the first 200 of /health/ready, polled every 20 ms; RSS from /proc/<pid>/status once settled',
        embedded
          ? 'the first start copies the migrated template into the new data directory (initdb and every migration when there is none); "the embedded database alone" is a bare Node.js process holding the same database open after one query (bench/embedded-idle.ts), its ratio against the restarted server\'s RSS (each holds a Node.js runtime of its own); "with the server\'s malloc thresholds": the same process with the MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_ that `serve` starts itself with (src/lean-process.ts; `serve` also runs with a young generation of 8 MiB halves), what binds the server\'s idle RSS'
          : 'the first start applies every migration to an empty database; the database server is another process (not counted)',
      ],
    };
    return [section];
  },
};
