/**
 * `npm run bench [-- <name>…] [--db pglite|postgres] [--json FILE] [--files N]`: runs the named benchmarks
 * (all when none is named) against a Coffer started for the run, and prints each result as a ratio against
 * a baseline measured in the same run. `--db postgres` runs every Coffer server of the run on PostgreSQL
 * (a database of its own on the server of COFFER_BENCH_DATABASE_URL, dropped at the end); `--json FILE`
 * also writes every row as data, to compare runs; `--files N` sizes the project of `list` and the bucket
 * that `s3api` lists.
 *
 * Environment:
 *   COFFER_BENCH_DATABASE_URL  the PostgreSQL server of --db postgres (any database of it: the run creates its own)
 *   COFFER_BENCH_LIST_REQUESTS requests per case of `list` (default 100)
 *   COFFER_BENCH_LIST_ROUNDS   rounds of every case of `list` on the same seeded files (default 1)
 *   COFFER_BENCH_SIZE_MB       large transfer size in MiB (default 1024; a second run at a quarter of it)
 *   COFFER_BENCH_ROUNDS        repetitions of each large transfer and its raw baseline (default 3)
 *   COFFER_BENCH_SMALL_COUNT   small uploads (default 2000); COFFER_BENCH_HEALTH_COUNT /health/live requests (20000)
 *   COFFER_BENCH_CONCURRENCY   requests in flight for small uploads and /health/live (default 16)
 *   COFFER_BENCH_SERVER        child (default: `src/main.ts serve` in its own process) or in-process
 *   COFFER_BENCH_SERVER_NODE_ARGS   Node.js options of the child server, e.g. `--cpu-prof --cpu-prof-dir=.tmp/prof`
 *   COFFER_BENCH_PART_MB, COFFER_BENCH_PARTS_IN_FLIGHT   multipart part size (default size / 16, ≥ 5) and parallelism (4)
 *   COFFER_BENCH_TUS_PATCH_MB  `tus` PATCH size in MiB (default 8)
 *   COFFER_BENCH_DELIVERIES, COFFER_BENCH_WEBHOOKS       webhook deliveries to send (default 5000) and webhooks they fan out to (10)
 *   COFFER_BENCH_WEBHOOK_CONCURRENCY                     POSTs in flight of the plain undici loop (default 64, the dispatcher's)
 *   COFFER_BENCH_S3_ENDPOINT, COFFER_BENCH_S3_REGION (us-east-1), COFFER_BENCH_S3_ACCESS_KEY_ID,
 *   COFFER_BENCH_S3_SECRET_ACCESS_KEY, COFFER_BENCH_S3_BUCKET   the S3 server of `s3` (path-style); unset: a private
 *                              radosgw (bash .ci/rgw.sh, memstore per COFFER_RGW_MEMSTORE_MB or sized for the run)
 *   COFFER_BENCH_S3_SIZE_MB, COFFER_BENCH_S3_MULTIPART_MB   `s3` single object (default 256) and multipart (1024, in 16
 *                              parts, COFFER_BENCH_PARTS_IN_FLIGHT at once) sizes; COFFER_BENCH_S3_SMALL_COUNT uploads
 *                              timed for the initiate + confirm latency (default 50)
 *   COFFER_BENCH_BACKUP_FILES  files seeded by `backup` (default 100000)
 *   `s3api` (Coffer's /s3 with @aws-sdk/client-s3 against the same client on a private radosgw, as `s3` starts it)
 *                              uses COFFER_BENCH_SMALL_COUNT and COFFER_BENCH_CONCURRENCY (PutObject and GetObject
 *                              of 1 KiB, with B1 and the REST small upload), COFFER_BENCH_SIZE_MB (one multipart
 *                              upload and GetObject, no quarter-size run), COFFER_BENCH_PARTS_IN_FLIGHT,
 *                              COFFER_BENCH_ROUNDS, COFFER_BENCH_LIST_REQUESTS and --files (ListObjectsV2 walk)
 *                              COFFER_BENCH_S3API_SECTIONS  the sections of `s3api` to run, comma-separated: small
 *                              (Put/GetObject 1 KiB), multipart, list (default all three)
 *   `sdk` (@coffer/client against the hand-written clients, rounds in A B B A order) uses COFFER_BENCH_SIZE_MB (one
 *                              multipart upload of that size from a Buffer, no quarter-size run), COFFER_BENCH_ROUNDS,
 *                              COFFER_BENCH_PART_MB, COFFER_BENCH_PARTS_IN_FLIGHT, COFFER_BENCH_SMALL_COUNT and
 *                              COFFER_BENCH_CONCURRENCY as above
 *
 *   COFFER_BENCH_RENDERS, COFFER_BENCH_RENDITION_REQUESTS   `renditions`: renders timed on each side (default 10 per
 *                              round) and requests of the cached-serve comparison (default 1000); COFFER_BENCH_BIG_RENDERS
 *                              renders at once (8) of COFFER_BENCH_BIG_MP megapixel sources (50) for the memory row
 *
 * Adding a benchmark: a module exporting a `Bench` (see bench/lib.ts), listed in BENCHES below.
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { backup } from './backup.ts';
import { agent } from './client.ts';
import { type ServerMode, startCoffer } from './coffer-server.ts';
import { type DbKind, dropDatabases, useDatabase } from './database.ts';
import { dropCaches } from './disk.ts';
import { type Bench, type BenchContext, cleanupNow, envInteger, out, scratchDir } from './lib.ts';
import { listBench } from './list.ts';
import { multipart } from './multipart.ts';
import { renditions } from './renditions.ts';
import { jsonRows, printTable, type Section } from './report.ts';
import { s3 } from './s3.ts';
import { s3api } from './s3api.ts';
import { sdk } from './sdk.ts';
import { soak } from './soak.ts';
import { startup } from './startup.ts';
import { tracing } from './tracing.ts';
import { tusBench } from './tus.ts';
import { uploads } from './uploads.ts';
import { webhooks } from './webhooks.ts';

const BENCHES: Bench[] = [
  uploads,
  multipart,
  tusBench,
  webhooks,
  s3,
  s3api,
  sdk,
  startup,
  tracing,
  listBench,
  backup,
  renditions,
  soak,
];
/** Run only when named: `soak` takes ten minutes by default. */
const ON_REQUEST = new Set(['soak']);

function usage(): string {
  return (
    'Usage: npm run bench [-- <benchmark>…] [--db pglite|postgres] [--json FILE] [--files N]\n\n' +
    '  --db      the database of every Coffer server: embedded PGlite (default) or PostgreSQL, a database\n' +
    '            per server on the server of COFFER_BENCH_DATABASE_URL, dropped at the end\n' +
    '  --json    also writes every row (name, value, unit, baseline, ratio, target, met) to FILE\n' +
    '  --files   files seeded by `list` and `s3api` (default 1000000)\n\n' +
    `Benchmarks:\n${BENCHES.map((b) => `  ${b.name.padEnd(10)} ${b.description}`).join('\n')}\n`
  );
}

/** Benchmark names and `--name value` options; the runner's own options are `db` and `json`. */
function parseArgs(args: string[]): { names: string[]; options: Map<string, string> } {
  const names: string[] = [];
  const options = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!arg.startsWith('--')) {
      names.push(arg);
      continue;
    }
    const [flag, inline] = arg.slice(2).split('=', 2) as [string, string | undefined];
    const value = inline ?? args[++i];
    if (!OPTIONS.includes(flag) || value === undefined || value.startsWith('--')) {
      throw new UsageError(`${arg}: expected one of ${OPTIONS.map((o) => `--${o} VALUE`).join(', ')}`);
    }
    options.set(flag, value);
  }
  return { names, options };
}

const OPTIONS = ['db', 'json', 'files'];

class UsageError extends Error {}

async function main(args: string[]): Promise<void> {
  if (args.includes('--help') || args.includes('-h')) {
    out(usage());
    return;
  }
  let parsed: ReturnType<typeof parseArgs>;
  let db: DbKind;
  try {
    parsed = parseArgs(args);
    const unknown = parsed.names.filter((name) => !BENCHES.some((bench) => bench.name === name));
    if (unknown.length > 0) throw new UsageError(`Unknown benchmark: ${unknown.join(', ')}`);
    const chosen = parsed.options.get('db') ?? 'pglite';
    if (chosen !== 'pglite' && chosen !== 'postgres')
      throw new UsageError(`--db: expected pglite or postgres, got ${chosen}`);
    db = chosen;
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`${error.message}\n\n${usage()}`);
    process.exitCode = 64;
    return;
  }
  const { names, options } = parsed;
  const jsonFile = options.get('json');
  const selected =
    names.length === 0
      ? BENCHES.filter((bench) => !ON_REQUEST.has(bench.name))
      : BENCHES.filter((bench) => names.includes(bench.name));
  const mode = (process.env.COFFER_BENCH_SERVER?.trim() || 'child') as ServerMode;
  if (mode !== 'child' && mode !== 'in-process')
    throw new Error('COFFER_BENCH_SERVER: expected child or in-process');

  await useDatabase(db);
  const scratch = scratchDir('bench');
  const canDropCaches = dropCaches();
  const server = await startCoffer(join(scratch, 'data'), mode);
  const context: BenchContext = {
    server,
    db,
    options,
    scratch,
    sizeMib: envInteger('COFFER_BENCH_SIZE_MB', 1024),
    rounds: envInteger('COFFER_BENCH_ROUNDS', 3),
    canDropCaches,
  };
  const started = new Date();

  out(`# Coffer benchmarks (${new Date().toISOString()})`);
  out();
  out(
    `Node ${process.version}; server: ${mode === 'child' ? `child process \`src/main.ts serve\` (pid ${server.pid})` : 'in this process (client and server share the CPU and the RSS)'}` +
      ` on ${server.url}, ${db === 'pglite' ? 'embedded PGlite' : 'PostgreSQL (a database per server on COFFER_BENCH_DATABASE_URL)'}, log level silent; client: undici in the bench process.`,
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
    await dropDatabases();
  }
  printTable(sections);
  out();
  out(
    `Load average (1, 5, 15 min) before: ${loadBefore}; after: ${load()}. Above ~1 before the run, other work shared the ${availableParallelism()} CPUs and the disk: expect noisier ratios.`,
  );
  if (jsonFile) {
    writeFileSync(
      jsonFile,
      `${JSON.stringify(
        {
          started: started.toISOString(),
          benchmarks: selected.map((bench) => bench.name),
          db,
          server: mode,
          node: process.version,
          machine: { cpus: availableParallelism(), memory_gib: Math.round(totalmem() / 1024 ** 3) },
          load_average: { before: loadBefore, after: load() },
          environment: Object.fromEntries(
            Object.entries(process.env).filter(
              ([name]) => name.startsWith('COFFER_BENCH_') && !name.includes('SECRET'),
            ),
          ),
          rows: jsonRows(sections),
        },
        null,
        2,
      )}\n`,
    );
    out();
    out(`Rows written to ${jsonFile}.`);
  }
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
