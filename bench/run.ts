/**
 * `npm run bench [-- <name>…]`: runs the named benchmarks (all when none is named) against a Coffer
 * started for the run, and prints each result as a ratio against a baseline measured in the same run.
 *
 * Environment:
 *   COFFER_BENCH_SIZE_MB       large transfer size in MiB (default 1024; a second run at a quarter of it)
 *   COFFER_BENCH_ROUNDS        repetitions of each large transfer and its raw baseline (default 3)
 *   COFFER_BENCH_SMALL_COUNT   small uploads (default 2000); COFFER_BENCH_HEALTH_COUNT /health/live requests (20000)
 *   COFFER_BENCH_CONCURRENCY   requests in flight for small uploads and /health/live (default 16)
 *   COFFER_BENCH_SERVER        child (default: `src/main.ts serve` in its own process) or in-process
 *   COFFER_BENCH_SERVER_NODE_ARGS   Node.js options of the child server, e.g. `--cpu-prof --cpu-prof-dir=.tmp/prof`
 *   COFFER_BENCH_PART_MB, COFFER_BENCH_PARTS_IN_FLIGHT   multipart part size (default size / 16, ≥ 5) and parallelism (4)
 *   COFFER_BENCH_DELIVERIES, COFFER_BENCH_WEBHOOKS       webhook deliveries to send (default 5000) and webhooks they fan out to (10)
 *   COFFER_BENCH_WEBHOOK_CONCURRENCY                     POSTs in flight of the plain undici loop (default 64, the dispatcher's)
 *   COFFER_BENCH_S3_ENDPOINT, COFFER_BENCH_S3_REGION (us-east-1), COFFER_BENCH_S3_ACCESS_KEY_ID,
 *   COFFER_BENCH_S3_SECRET_ACCESS_KEY, COFFER_BENCH_S3_BUCKET   the S3 server of `s3` (path-style); unset: a private
 *                              radosgw (bash .ci/rgw.sh, memstore per COFFER_RGW_MEMSTORE_MB or sized for the run)
 *   COFFER_BENCH_S3_SIZE_MB, COFFER_BENCH_S3_MULTIPART_MB   `s3` single object (default 256) and multipart (1024, in 16
 *                              parts, COFFER_BENCH_PARTS_IN_FLIGHT at once) sizes; COFFER_BENCH_S3_SMALL_COUNT uploads
 *                              timed for the initiate + confirm latency (default 50)
 *   `sdk` (@coffer/client against the hand-written clients, rounds in A B B A order) uses COFFER_BENCH_SIZE_MB (one
 *                              multipart upload of that size from a Buffer, no quarter-size run), COFFER_BENCH_ROUNDS,
 *                              COFFER_BENCH_PART_MB, COFFER_BENCH_PARTS_IN_FLIGHT, COFFER_BENCH_SMALL_COUNT and
 *                              COFFER_BENCH_CONCURRENCY as above
 *
 * Adding a benchmark: a module exporting a `Bench` (see bench/lib.ts), listed in BENCHES below.
 */
import { availableParallelism, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import {
  agent,
  type Bench,
  type BenchContext,
  cleanupNow,
  dropCaches,
  envInteger,
  out,
  printTable,
  type Section,
  type ServerMode,
  scratchDir,
  startCoffer,
} from './lib.ts';
import { multipart } from './multipart.ts';
import { s3 } from './s3.ts';
import { sdk } from './sdk.ts';
import { uploads } from './uploads.ts';
import { webhooks } from './webhooks.ts';

const BENCHES: Bench[] = [uploads, multipart, webhooks, s3, sdk];

function usage(): string {
  return `Usage: npm run bench [-- <benchmark>…]\n\nBenchmarks:\n${BENCHES.map((b) => `  ${b.name.padEnd(10)} ${b.description}`).join('\n')}\n`;
}

async function main(args: string[]): Promise<void> {
  if (args.includes('--help') || args.includes('-h')) {
    out(usage());
    return;
  }
  const unknown = args.filter((name) => !BENCHES.some((bench) => bench.name === name));
  if (unknown.length > 0) {
    process.stderr.write(`Unknown benchmark: ${unknown.join(', ')}\n\n${usage()}`);
    process.exitCode = 64;
    return;
  }
  const selected = args.length === 0 ? BENCHES : BENCHES.filter((bench) => args.includes(bench.name));
  const mode = (process.env.COFFER_BENCH_SERVER?.trim() || 'child') as ServerMode;
  if (mode !== 'child' && mode !== 'in-process')
    throw new Error('COFFER_BENCH_SERVER: expected child or in-process');

  const scratch = scratchDir('bench');
  const canDropCaches = dropCaches();
  const server = await startCoffer(join(scratch, 'data'), mode);
  const context: BenchContext = {
    server,
    scratch,
    sizeMib: envInteger('COFFER_BENCH_SIZE_MB', 1024),
    rounds: envInteger('COFFER_BENCH_ROUNDS', 3),
    canDropCaches,
  };

  out(`# Coffer benchmarks (${new Date().toISOString()})`);
  out();
  out(
    `Node ${process.version}; server: ${mode === 'child' ? `child process \`src/main.ts serve\` (pid ${server.pid})` : 'in this process (client and server share the CPU and the RSS)'}` +
      ` on ${server.url}, embedded PGlite, log level silent; client: undici in the bench process.`,
  );
  out(
    `Machine: ${availableParallelism()} CPUs, ${Math.round(totalmem() / 1024 ** 3)} GiB RAM, shared by the client, the server and the disk baselines.`,
  );
  out(
    `Scratch and data directory: ${scratch} (removed at exit). Large size ${context.sizeMib} MiB, ${context.rounds} round(s).`,
  );
  out(
    'Ratios compare Coffer with a baseline measured in the same run; "met" says whether the target holds in this run.',
  );

  const load = () =>
    loadavg()
      .map((value) => value.toFixed(2))
      .join(' ');
  const loadBefore = load();
  const sections: Section[] = [];
  try {
    for (const bench of selected) {
      process.stderr.write(`bench ${bench.name}\n`);
      sections.push(...(await bench.run(context)));
    }
  } finally {
    await server.close();
    await agent.close();
  }
  printTable(sections);
  out();
  out(
    `Load average (1, 5, 15 min) before: ${loadBefore}; after: ${load()}. Above ~1 before the run, other work shared the ${availableParallelism()} CPUs and the disk: expect noisier ratios.`,
  );
  const missed = sections.flatMap((section) => section.rows).filter((row) => row.met === false);
  out();
  out(
    missed.length === 0
      ? 'All targets met.'
      : `Targets missed: ${missed.map((row) => row.benchmark.trim()).join('; ')}`,
  );
}

main(process.argv.slice(2))
  .catch((error: unknown) => {
    process.stderr.write(
      `bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  })
  .finally(cleanupNow);
