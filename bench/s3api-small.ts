/** Small objects through the S3 endpoint, against the REST API's upload flow and a bare INSERT. */
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import type { CofferServer } from './coffer-server.ts';
import { startInsertServer } from './helper-servers.ts';
import { type BenchContext, envInteger, progress } from './lib.ts';
import { pool } from './measure.ts';
import { abba, meanOf, type Side } from './s3-server.ts';
import { drainObject, type Project, type Sides, seconds } from './s3api-bucket.ts';
import type { SmallResult, SmallRound } from './s3api-report.ts';
import { measureInserts } from './small-uploads.ts';
import { confirm, initiate, put } from './upload-flow.ts';

export async function smallRounds(
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
export async function restBaselines(
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
