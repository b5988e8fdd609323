/**
 * Coffer's S3-compatible endpoint (/s3) with the real @aws-sdk/client-s3 as the client, against the same
 * client and configuration on a private radosgw (bench/s3-server.ts) in the same run. Coffer keeps its
 * bytes on its local store and runs on the run's database (`--db`); a long-lived S3 credential of a
 * project is made with the admin key, and the server's rate limits are off (they would cap the rates):
 *   1. PutObject of 1 KiB, COFFER_BENCH_CONCURRENCY (16) in flight, COFFER_BENCH_SMALL_COUNT (2000) per
 *      run: against B1 (bench/uploads.ts: one INSERT behind a bare Fastify route, before and after) and
 *      against radosgw; the REST small upload (initiate + PUT + confirm) is measured too, for reference;
 *   2. GetObject of those objects, as many and as parallel, against radosgw;
 *   3. a multipart upload of COFFER_BENCH_SIZE_MB (1 GiB) in parts of a sixteenth of it (≥ 5 MiB),
 *      COFFER_BENCH_PARTS_IN_FLIGHT (4) at once, and its download by one GetObject, against radosgw; and,
 *      for the bound Coffer's durable store puts on the upload, dd writing as much to the same disk
 *      (before and after each round);
 *   4. ListObjectsV2 pages of 1,000 keys on a project of `--files N` (default 1,000,000) files seeded by
 *      bench/list-seed.ts: every page of a walk by continuation token, p50 / p99.
 * Sides 1–3 run A B B A per round (B A A B the next), COFFER_BENCH_ROUNDS rounds; rates are medians of
 * the rounds' means, ratios medians of the rounds' own ratios.
 */
import { randomFillSync } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { openPglite } from '../src/infra/db.ts';
import { databaseFor } from './database.ts';
import {
  ADMIN_KEY,
  type Bench,
  type BenchContext,
  type CofferServer,
  call,
  createProject,
  envInteger,
  expectStatus,
  fmt,
  KiB,
  MiB,
  mean,
  pool,
  progress,
  purgeFiles,
  rawWrite,
  type Section,
  startCoffer,
  startInsertServer,
} from './lib.ts';
import { latencies } from './list.ts';
import { seedFiles, seedInto } from './list-seed.ts';
import {
  abba,
  externalTarget,
  meanOf,
  type Plan,
  plan,
  purge,
  type Side,
  sdkClient,
  startRgw,
} from './s3-server.ts';
import {
  dbName,
  listingSection,
  type MultipartRound,
  multipartSection,
  PAGE_KEYS,
  type SmallResult,
  type SmallRound,
  smallSection,
} from './s3api-report.ts';
import { confirm, initiate, measureInserts, put } from './uploads.ts';

const CONTENT_TYPE = 'application/octet-stream';
/** Off: the endpoint's per-address and per-credential limits would cap every rate measured here. */
const NO_RATE_LIMITS = {
  COFFER_RATE_LIMIT_OBJECTS_PER_MINUTE: '0',
  COFFER_RATE_LIMIT_API_KEY_PER_MINUTE: '0',
  COFFER_RATE_LIMIT_IP_PER_MINUTE: '0',
};

type Project = Awaited<ReturnType<typeof createProject>>;

interface Bucket {
  name: string;
  client: S3Client;
}

/** The bucket of a project and an SDK client of `server`'s /s3 with a new long-lived S3 credential. */
async function s3Bucket(server: CofferServer, projectId: string): Promise<Bucket> {
  const admin = { token: ADMIN_KEY };
  const info = await call<{ bucket: string }>('GET', `${server.url}/v1/projects/${projectId}`, admin);
  expectStatus(info, 200, 'get project');
  const credential = await call('POST', `${server.url}/v1/projects/${projectId}/s3-credentials`, {
    ...admin,
    body: { name: 'bench', scopes: ['files:read', 'files:upload', 'files:delete'] },
  });
  expectStatus(credential, 201, 'create S3 credential');
  const client = sdkClient({
    endpoint: `${server.url}/s3`,
    region: 'us-east-1',
    accessKeyId: credential.body.access_key_id,
    secretAccessKey: credential.body.secret_access_key,
  });
  return { name: info.body.bucket, client };
}

interface Sides {
  coffer: { client: S3Client; bucket: string };
  sdk: { client: S3Client; bucket: string };
}

const seconds = (start: number) => (performance.now() - start) / 1000;

async function drainObject(client: S3Client, bucket: string, key: string, size: number): Promise<void> {
  const { Body } = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  let received = 0;
  for await (const chunk of Body as AsyncIterable<Uint8Array>) received += chunk.length;
  if (received !== size) throw new Error(`GetObject ${key}: ${received} of ${size} bytes`);
}

// ------------------------------------------------------------------------------------------ small objects

async function smallRounds(
  c: BenchContext,
  server: CofferServer,
  sides: Sides,
  body: Buffer,
): Promise<SmallResult> {
  const count = envInteger('COFFER_BENCH_SMALL_COUNT', 2000);
  const concurrency = envInteger('COFFER_BENCH_CONCURRENCY', 16);
  const putAll = (side: Side, run: string) => {
    const { client, bucket } = sides[side];
    return pool(count, concurrency, async (i) => {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `bench/${run}/${i}.bin`, Body: body }));
    });
  };
  const getAll = (side: Side, run: string) => {
    const { client, bucket } = sides[side];
    return pool(count, concurrency, (i) => drainObject(client, bucket, `bench/${run}/${i}.bin`, body.length));
  };
  const timed = async (work: () => Promise<void>) => {
    const cpu = server.cpuSeconds();
    const start = performance.now();
    await work();
    return { rate: count / seconds(start), cpu: server.cpuSeconds() - cpu };
  };
  progress(`s3api: warm-up, ${Math.min(count, 200)} PutObject and GetObject per side`);
  for (const side of ['coffer', 'sdk'] as const) {
    await pool(Math.min(count, 200), concurrency, async (i) => {
      await sides[side].client.send(
        new PutObjectCommand({ Bucket: sides[side].bucket, Key: `warm/${i}.bin`, Body: body }),
      );
      await drainObject(sides[side].client, sides[side].bucket, `warm/${i}.bin`, body.length);
    });
  }
  const rounds: SmallRound[] = [];
  for (let round = 1; round <= c.rounds; round++) {
    const runs: { side: Side; put: number; get: number; cpu: { put: number; get: number } }[] = [];
    for (const [i, side] of abba(round).entries()) {
      progress(`s3api: round ${round}/${c.rounds}, ${count} PutObject then GetObject of 1 KiB (${side})`);
      const run = `r${round}-${i}`;
      const puts = await timed(() => putAll(side, run));
      const gets = await timed(() => getAll(side, run));
      runs.push({ side, put: puts.rate, get: gets.rate, cpu: { put: puts.cpu, get: gets.cpu } });
    }
    const of = (side: Side, pick: 'put' | 'get') =>
      meanOf(runs.filter((r) => r.side === side).map((r) => ({ v: r[pick] }))).v;
    const cofferCpu = meanOf(runs.filter((r) => r.side === 'coffer').map((r) => r.cpu));
    rounds.push({
      put: { coffer: of('coffer', 'put'), sdk: of('sdk', 'put') },
      get: { coffer: of('coffer', 'get'), sdk: of('sdk', 'get') },
      serverCpu: { put: (cofferCpu.put / count) * 1000, get: (cofferCpu.get / count) * 1000 },
    });
  }
  return { count, concurrency, rounds };
}

/** B1 around the REST small uploads of `count`, `concurrency` in flight: the baselines of PutObject. */
async function restBaselines(
  c: BenchContext,
  project: Project,
  body: Buffer,
  count: number,
  concurrency: number,
) {
  const b1 = await startInsertServer(join(c.scratch, 's3api-b1'));
  try {
    const upload = async (i: number) => {
      const started = await initiate(project, `rest-${i}.bin`, body.length);
      await put(started.upload_url, body.length, body);
      const file = await confirm(project, started.file_id);
      if (file.status !== 'ready') throw new Error(`confirm: the file is ${file.status}, not ready`);
    };
    progress(`s3api: B1 × ${count}, REST small uploads × ${count}, B1 × ${count}`);
    await measureInserts(b1, 500, concurrency);
    await pool(100, concurrency, (i) => upload(-1 - i));
    const before = await measureInserts(b1, count, concurrency);
    const start = performance.now();
    await pool(count, concurrency, upload);
    const rest = count / seconds(start);
    const after = await measureInserts(b1, count, concurrency);
    return { b1: (before.rate + after.rate) / 2, rest };
  } finally {
    await b1.close();
  }
}

// -------------------------------------------------------------------------------------------- multipart

async function multipartUpload(client: S3Client, bucket: string, key: string, data: Buffer, p: Plan) {
  const { UploadId } = await client.send(
    new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: CONTENT_TYPE }),
  );
  const etags: string[] = [];
  await pool(p.parts.length, p.inFlight, async (i) => {
    const [offset, length] = p.parts[i]!;
    const { ETag } = await client.send(
      new UploadPartCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        PartNumber: i + 1,
        Body: data.subarray(offset, offset + length),
      }),
    );
    etags[i] = ETag!;
  });
  await client.send(
    new CompleteMultipartUploadCommand({
      Bucket: bucket,
      Key: key,
      UploadId,
      MultipartUpload: { Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) },
    }),
  );
}

async function multipartRounds(
  c: BenchContext,
  sides: Sides,
  /** After an upload: what the side still does in the background is done (outside every timing). */
  settle: Record<Side, () => Promise<void>>,
  clean: Record<Side, () => Promise<void>>,
  data: Buffer,
  p: Plan,
) {
  const rounds: MultipartRound[] = [];
  const rawFile = join(c.scratch, 's3api-dd.bin');
  const disk = async () => {
    progress(`s3api: dd ${fmt.size(data.length / MiB)} to the disk of Coffer's store`);
    const seconds = await rawWrite(rawFile, data.length / MiB);
    await rm(rawFile, { force: true });
    return seconds;
  };
  for (let round = 1; round <= c.rounds; round++) {
    const diskBefore = await disk();
    const times = {
      up: { coffer: [] as number[], sdk: [] as number[] },
      down: { coffer: [] as number[], sdk: [] as number[] },
    };
    // Each object goes before the next: a memstore radosgw holds about one at a time.
    for (const [i, side] of abba(round).entries()) {
      progress(`s3api: multipart ${fmt.size(data.length / MiB)} round ${round}/${c.rounds} (${side})`);
      const { client, bucket } = sides[side];
      const key = `large/r${round}-${i}.bin`;
      let start = performance.now();
      await multipartUpload(client, bucket, key, data, p);
      times.up[side].push(seconds(start));
      await settle[side]();
      start = performance.now();
      await drainObject(client, bucket, key, data.length);
      times.down[side].push(seconds(start));
      await clean[side]();
    }
    rounds.push({
      disk: mean([diskBefore, await disk()]),
      up: { coffer: mean(times.up.coffer), sdk: mean(times.up.sdk) },
      down: { coffer: mean(times.down.coffer), sdk: mean(times.down.sdk) },
    });
  }
  return rounds;
}

/** Waits until every file of `project` has its SHA-256 (a digest job reading an object back would slow the next step). */
async function checksummed(project: Project): Promise<void> {
  for (;;) {
    const page = await project.api<{ items: { checksum_sha256: string | null }[] }>(
      'GET',
      '/files?limit=200',
    );
    expectStatus(page, 200, 'list files');
    if (page.body.items.every((file) => file.checksum_sha256 !== null)) return;
    await sleep(20);
  }
}

// --------------------------------------------------------------------------------------------- listing

/** Milliseconds of each ListObjectsV2 page of a walk over the whole bucket, by continuation token. */
async function walk(client: S3Client, bucket: string): Promise<{ times: number[]; keys: number }> {
  const times: number[] = [];
  let keys = 0;
  let ContinuationToken: string | undefined;
  do {
    const start = performance.now();
    const page = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, MaxKeys: PAGE_KEYS, ContinuationToken }),
    );
    times.push(performance.now() - start);
    keys += page.KeyCount ?? 0;
    ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (ContinuationToken);
  return { times, keys };
}

/**
 * Seeds `files` files into a new project of the server on `dataDir` (PostgreSQL: while it runs; the
 * embedded database: stopped, seeded from this process, restarted); answers the server then running.
 */
async function seedListing(c: BenchContext, dataDir: string, server: CofferServer, files: number) {
  const project = await createProject(server);
  progress(`s3api: seeding ${files} files`);
  const report = (done: number) => progress(`s3api: ${done} of ${files} files`);
  if (c.db === 'postgres') {
    const seeded = await seedFiles((await databaseFor(dataDir))!, project.id, files, report);
    return { server, project, seeded };
  }
  await server.close();
  const db = await openPglite(dataDir);
  let seeded: Awaited<ReturnType<typeof seedInto>>;
  try {
    seeded = await seedInto(db, project.id, files, report);
  } finally {
    await db.close();
  }
  const restarted = await startCoffer(dataDir, c.server.mode, { env: NO_RATE_LIMITS });
  return { server: restarted, project, seeded };
}

// ----------------------------------------------------------------------------------------------- bench

const SECTIONS = ['small', 'multipart', 'list'] as const;

/** COFFER_BENCH_S3API_SECTIONS: the sections to run, comma-separated (default all of SECTIONS). */
function sectionsToRun(): Set<string> {
  const named = process.env.COFFER_BENCH_S3API_SECTIONS?.split(',').map((name) => name.trim());
  if (!named) return new Set(SECTIONS);
  const unknown = named.filter((name) => !(SECTIONS as readonly string[]).includes(name));
  if (unknown.length > 0 || named.length === 0)
    throw new Error(
      `COFFER_BENCH_S3API_SECTIONS: expected some of ${SECTIONS.join(', ')}, got ${unknown.join(', ')}`,
    );
  return new Set(named);
}

export const s3api: Bench = {
  name: 's3api',
  description:
    "Coffer's /s3 with @aws-sdk/client-s3 vs radosgw: Put/GetObject 1 KiB, multipart, ListObjectsV2 at 1M keys",
  async run(context) {
    const files = Number(context.options.get('files') ?? 1_000_000);
    if (!Number.isSafeInteger(files) || files < 1)
      throw new Error(`--files: expected a count ≥ 1, got ${files}`);
    const parts = sectionsToRun();
    const mib = context.sizeMib;
    const p = plan(mib, envInteger('COFFER_BENCH_PARTS_IN_FLIGHT', 4));
    const target =
      externalTarget() ??
      (await startRgw(join(context.scratch, 'rgw-s3api'), Math.max(4096, 2 * mib + 1024)));
    const rgw = sdkClient(target);
    const prefix = `bench-s3api-${process.pid}/`;
    const dataDir = join(context.scratch, 's3api');
    let server = await startCoffer(dataDir, context.server.mode, { env: NO_RATE_LIMITS });
    const clients: S3Client[] = [rgw];
    try {
      const data = Buffer.allocUnsafe(mib * MiB);
      for (let offset = 0; offset < data.length; offset += 256 * MiB)
        randomFillSync(data, offset, Math.min(256 * MiB, data.length - offset));
      const sdkSide = { client: rgw, bucket: target.bucket };
      // Keys of the radosgw side under `prefix` (the bucket may be shared), Coffer's in a bucket per phase.
      const prefixed = (client: S3Client): S3Client =>
        ({
          send: (command: { input: { Key?: string } }) => {
            if (command.input.Key !== undefined) command.input.Key = `${prefix}${command.input.Key}`;
            return client.send(command as never);
          },
        }) as unknown as S3Client;

      const sections: Section[] = [];
      if (parts.has('small')) {
        const smallProject = await createProject(server);
        const smallBucket = await s3Bucket(server, smallProject.id);
        clients.push(smallBucket.client);
        const sides: Sides = {
          coffer: { client: smallBucket.client, bucket: smallBucket.name },
          sdk: { ...sdkSide, client: prefixed(rgw) },
        };
        const body = data.subarray(0, KiB);
        const small = await smallRounds(context, server, sides, body);
        const rest = await restBaselines(
          context,
          smallProject,
          body,
          envInteger('COFFER_BENCH_SMALL_COUNT', 2000),
          envInteger('COFFER_BENCH_CONCURRENCY', 16),
        );
        await purge(rgw, target, prefix);
        sections.push(smallSection(context, small, rest));
      }

      if (parts.has('multipart')) {
        const largeProject = await createProject(server);
        const largeBucket = await s3Bucket(server, largeProject.id);
        clients.push(largeBucket.client);
        const large = await multipartRounds(
          context,
          {
            coffer: { client: largeBucket.client, bucket: largeBucket.name },
            sdk: { ...sdkSide, client: prefixed(rgw) },
          },
          { coffer: () => checksummed(largeProject), sdk: async () => undefined },
          {
            coffer: async () => void (await purgeFiles(server, largeProject)),
            sdk: () => purge(rgw, target, prefix),
          },
          data,
          p,
        );
        sections.push(multipartSection(mib, p, large));
      }

      if (parts.has('list')) {
        const listed = await seedListing(context, dataDir, server, files);
        server = listed.server;
        const listBucket = await s3Bucket(server, listed.project.id);
        clients.push(listBucket.client);
        const requests = envInteger('COFFER_BENCH_LIST_REQUESTS', 100);
        const times = (send: () => Promise<unknown>) => latencies(requests, Math.min(10, requests), send);
        progress('s3api: HeadBucket and the first page of ListObjectsV2');
        const { client, name } = listBucket;
        const head = await times(() => client.send(new HeadBucketCommand({ Bucket: name })));
        const first = await times(() =>
          client.send(new ListObjectsV2Command({ Bucket: name, MaxKeys: PAGE_KEYS })),
        );
        progress('s3api: walking every page of ListObjectsV2');
        const pages = await walk(client, name);
        sections.push(listingSection(files, listed.seeded, head, first, pages));
      }

      return sections.map((section, i) =>
        i === 0
          ? {
              ...section,
              notes: [
                `S3 server: ${target.description}; Coffer: a server of its own (${server.mode === 'child' ? 'child process' : 'in this process'}) on ${dbName(context)}, local store, rate limits off`,
                ...section.notes,
              ],
            }
          : section,
      );
    } finally {
      for (const client of clients) client.destroy();
      await server.close();
      await target.stop();
    }
  },
};
