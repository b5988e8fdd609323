/**
 * What the S3 benchmarks (bench/s3.ts, bench/s3api.ts) share: the S3 server they compare against (a
 * private radosgw, or the one named by COFFER_BENCH_S3_*), an SDK client of it, its clean-up, the
 * multipart plan, and the A B B A order of rounds.
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { MiB, onCleanup, progress, ROOT } from './lib.ts';

/** Parts of a multipart upload, at least MIN_PART_MIB each (S3's smallest but the last). */
const PARTS = 16;
export const MIN_PART_MIB = 5;

export interface S3Target {
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  bucket: string;
  /** For the report: where the server comes from. */
  description: string;
  /** Frees the bytes of deleted objects now (radosgw's garbage collector), on a server the bench runs. */
  collect?: () => Promise<void>;
  stop(): Promise<void>;
}

export function externalTarget(): S3Target | undefined {
  const endpoint = process.env.COFFER_BENCH_S3_ENDPOINT?.trim();
  if (!endpoint) return undefined;
  const required = (name: string) => {
    const value = process.env[name]?.trim();
    if (!value) throw new Error(`${name} is required with COFFER_BENCH_S3_ENDPOINT`);
    return value;
  };
  return {
    endpoint,
    region: process.env.COFFER_BENCH_S3_REGION?.trim() || 'us-east-1',
    accessKeyId: required('COFFER_BENCH_S3_ACCESS_KEY_ID'),
    secretAccessKey: required('COFFER_BENCH_S3_SECRET_ACCESS_KEY'),
    bucket: required('COFFER_BENCH_S3_BUCKET'),
    description: `${endpoint} (COFFER_BENCH_S3_ENDPOINT)`,
    stop: async () => undefined,
  };
}

export function run(command: string, args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((done, fail) => {
    // stderr is progress (rgw.sh) or diagnostics: the caller's; stdout is the answer.
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
    });
    child.once('error', fail);
    child.once('close', (code) =>
      code === 0 ? done(stdout) : fail(new Error(`${command} ${args.join(' ')}: exit ${code}`)),
    );
  });
}

/** A private radosgw in `dir` (bash .ci/rgw.sh), stopped by `stop()` or at exit, whichever comes first. */
export async function startRgw(dir: string, memstoreMib: number): Promise<S3Target> {
  if (!existsSync(join(ROOT, '.ci/rgw.sh'))) {
    throw new Error(
      '.ci/rgw.sh is missing: name an S3 server with COFFER_BENCH_S3_ENDPOINT and its siblings',
    );
  }
  // Run from a copy of .ci: bash reads a script as it goes, so an edit of the tree during the run
  // would otherwise change the script half-way (and stop must be the script that started).
  const ci = `${dir}-ci`;
  cpSync(join(ROOT, '.ci'), ci, { recursive: true });
  const script = join(ci, 'rgw.sh');
  mkdirSync(dir, { recursive: true });
  let stopped = false;
  // Registered before the start: a start that dies half-way may have left daemons behind.
  const stopSync = () => {
    if (stopped) return;
    stopped = true;
    spawnSync('bash', [script, 'stop', dir], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  };
  onCleanup(stopSync);
  const memstore = process.env.COFFER_RGW_MEMSTORE_MB?.trim() || String(memstoreMib);
  progress(`starting a private radosgw in ${dir} (memstore ${memstore} MiB)`);
  const stdout = await run('bash', [script, 'start', dir], {
    ...process.env,
    COFFER_RGW_MEMSTORE_MB: memstore,
  });
  const vars = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const match = /^COFFER_TEST_S3_([A-Z_]+)=(.*)$/.exec(line.trim());
    if (match) vars.set(match[1]!, match[2]!);
  }
  const get = (name: string) => {
    const value = vars.get(name);
    if (!value) throw new Error(`bash .ci/rgw.sh start printed no COFFER_TEST_S3_${name}`);
    return value;
  };
  const conf = join(dir, 'ceph.conf');
  return {
    endpoint: get('ENDPOINT'),
    region: get('REGION'),
    accessKeyId: get('ACCESS_KEY_ID'),
    secretAccessKey: get('SECRET_ACCESS_KEY'),
    bucket: get('BUCKET'),
    description: `private radosgw (bash .ci/rgw.sh, memstore ${memstore} MiB) on ${get('ENDPOINT')}`,
    collect: async () => {
      await run('radosgw-admin', ['-c', conf, '-n', 'client.admin', 'gc', 'process', '--include-all']);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await run('bash', [script, 'stop', dir]);
    },
  };
}

/**
 * An SDK client of an S3 server, path-style, checksums only where an operation requires them (as the
 * bench's presigned URLs send none): the same client configuration for radosgw and for Coffer's /s3.
 */
export function sdkClient(
  target: Pick<S3Target, 'endpoint' | 'region' | 'accessKeyId' | 'secretAccessKey'>,
): S3Client {
  return new S3Client({
    region: target.region,
    endpoint: target.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: target.accessKeyId, secretAccessKey: target.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** Deletes every object and aborts every multipart upload under `prefix`, then frees their bytes. */
export async function purge(client: S3Client, target: S3Target, prefix: string): Promise<void> {
  const Bucket = target.bucket;
  let ContinuationToken: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket, Prefix: prefix, ContinuationToken }));
    for (const object of page.Contents ?? []) {
      await client.send(new DeleteObjectCommand({ Bucket, Key: object.Key! }));
    }
    ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (ContinuationToken);
  let KeyMarker: string | undefined;
  let UploadIdMarker: string | undefined;
  do {
    const page = await client.send(
      new ListMultipartUploadsCommand({ Bucket, Prefix: prefix, KeyMarker, UploadIdMarker }),
    );
    for (const upload of page.Uploads ?? []) {
      await client.send(
        new AbortMultipartUploadCommand({ Bucket, Key: upload.Key!, UploadId: upload.UploadId! }),
      );
    }
    KeyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
    UploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
  } while (KeyMarker);
  await target.collect?.();
}

export interface Plan {
  partBytes: number;
  /** [offset, length] of each part in the data buffer. */
  parts: [number, number][];
  inFlight: number;
}

export function plan(mib: number, inFlight: number): Plan {
  const partMib = Math.max(MIN_PART_MIB, Math.ceil(mib / PARTS));
  const parts: [number, number][] = [];
  for (let first = 0; first < mib; first += partMib) {
    parts.push([first * MiB, Math.min(partMib, mib - first) * MiB]);
  }
  return { partBytes: partMib * MiB, parts, inFlight };
}

export type Side = 'coffer' | 'sdk';

/**
 * Each side twice per round, A B B A, starting with the other side every other round: a drift of the
 * machine's speed within a round (other work on its few CPUs, the store's state) weighs on both alike.
 */
export function abba(round: number): Side[] {
  const [a, b]: [Side, Side] = round % 2 === 1 ? ['coffer', 'sdk'] : ['sdk', 'coffer'];
  return [a, b, b, a];
}

/** The field-by-field mean of measurements of the same shape. */
export function meanOf<T extends object>(items: T[]): T {
  const first = items[0]!;
  return Object.fromEntries(
    Object.keys(first).map((key) => [
      key,
      items.reduce((sum, item) => sum + (item as Record<string, number>)[key]!, 0) / items.length,
    ]),
  ) as T;
}
