/** The rounds of the S3 benchmark: each side in turn (A B B A), on the same S3 server. */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { expectStatus, type Project } from './client.ts';
import type { CofferServer } from './coffer-server.ts';
import { type BenchContext, KiB, MiB, progress } from './lib.ts';
import { fmt } from './measure.ts';
import {
  type CofferFile,
  cofferMultipart,
  cofferUpload,
  type MultipartTimes,
  type SingleTimes,
  settle,
} from './s3-coffer.ts';
import { drain, seconds } from './s3-http.ts';
import { type SealCalls, sdkGetUrl, sdkMultipart, sdkSealedUpload, sdkUpload } from './s3-sdk.ts';
import { abba, meanOf, type Plan, purge, type S3Target } from './s3-server.ts';

export interface Context {
  bench: BenchContext;
  server: CofferServer;
  project: Project;
  client: S3Client;
  target: S3Target;
  /** Where the SDK side's objects go, apart from Coffer's `<project id>/…`. */
  prefix: string;
  data: Buffer;
}

export interface SingleRound {
  coffer: SingleTimes;
  sdk: { presign: number; put: number; whole: number };
  /** Coffer: GET /download, then the GET; SDK: presign, then the GET of the same object. */
  cofferGet: { ask: number; get: number; whole: number };
  sdkGet: { presign: number; get: number; whole: number };
  /** The SDK's GET of its own PutObject object (a plain object, not an assembled one-part upload). */
  plainGet: number;
  digest: number;
  serverCpu: number;
  /** The S3 calls of Coffer's confirm on an object of this size, made from the SDK (seconds each). */
  seal: SealCalls;
  /** |1 − first / second| of the SDK's own two PUTs and two GETs of the round: the noise of the run. */
  spread: { put: number; get: number };
}

export async function singleRounds(c: Context, mib: number): Promise<SingleRound[]> {
  const { project, client, target, bench } = c;
  const body = c.data.subarray(0, mib * MiB);
  const expected = createHash('sha256').update(body).digest('hex');
  const rounds: SingleRound[] = [];
  for (let round = 1; round <= bench.rounds; round++) {
    const coffer: { times: SingleTimes; file: CofferFile }[] = [];
    const sdk: { times: SingleRound['sdk']; key: string }[] = [];
    const digest: number[] = [];
    const serverCpu: number[] = [];
    for (const [i, side] of abba(round).entries()) {
      progress(`${fmt.size(mib)} round ${round}/${bench.rounds}: upload (${side})`);
      if (side === 'coffer') {
        const cpu = c.server.cpuSeconds();
        const upload = await cofferUpload(project, body, `single-${mib}-${round}-${i}.bin`);
        serverCpu.push(c.server.cpuSeconds() - cpu);
        digest.push(await settle(project, upload.file.id, expected));
        coffer.push(upload);
      } else {
        const key = `${c.prefix}single-${round}-${i}.bin`;
        sdk.push({ times: await sdkUpload(client, target.bucket, key, body), key });
      }
    }
    // Both sides read the same object: the first one Coffer stored.
    const file = coffer[0]!.file;
    const cofferGet: SingleRound['cofferGet'][] = [];
    const sdkGet: SingleRound['sdkGet'][] = [];
    for (const side of abba(round)) {
      progress(`${fmt.size(mib)} round ${round}/${bench.rounds}: download (${side})`);
      const t0 = performance.now();
      if (side === 'coffer') {
        const download = await project.api<{ url: string }>('GET', `/files/${file.id}/download`);
        expectStatus(download, 200, 'download URL');
        const t1 = performance.now();
        await drain(download.body.url, body.length);
        cofferGet.push({ ask: seconds(t0, t1), get: seconds(t1), whole: seconds(t0) });
      } else {
        const url = await sdkGetUrl(client, target.bucket, file.storage_key);
        const t1 = performance.now();
        await drain(url, body.length);
        sdkGet.push({ presign: seconds(t0, t1), get: seconds(t1), whole: seconds(t0) });
      }
    }
    const plainUrl = await sdkGetUrl(client, target.bucket, sdk[0]!.key);
    const t0 = performance.now();
    await drain(plainUrl, body.length);
    const plainGet = seconds(t0);
    // Where confirm's time goes: its S3 calls on an object of this size, one by one.
    progress(`${fmt.size(mib)} round ${round}/${bench.rounds}: the S3 calls of confirm, from the SDK`);
    const { calls: seal } = await sdkSealedUpload(
      client,
      target.bucket,
      `${c.prefix}sealed-${round}.bin`,
      body,
    );
    await purge(client, target, `${project.id}/`);
    await purge(client, target, c.prefix);
    rounds.push({
      seal,
      spread: {
        put: Math.abs(1 - sdk[0]!.times.put / sdk[1]!.times.put),
        get: Math.abs(1 - sdkGet[0]!.get / sdkGet[1]!.get),
      },
      coffer: meanOf(coffer.map((upload) => upload.times)),
      sdk: meanOf(sdk.map((upload) => upload.times)),
      cofferGet: meanOf(cofferGet),
      sdkGet: meanOf(sdkGet),
      plainGet,
      digest: Math.max(...digest),
      serverCpu: Math.max(...serverCpu),
    });
  }
  return rounds;
}

export interface Latencies {
  coffer: { initiate: number[]; put: number[]; confirm: number[] };
  sdk: { initiate: number[]; put: number[]; confirm: number[] };
  /** HeadObject of an existing key: one S3 round trip. */
  head: number[];
}

export async function latencies(c: Context, count: number): Promise<Latencies> {
  const { project, client, target } = c;
  const body = c.data.subarray(0, KiB);
  const result: Latencies = {
    coffer: { initiate: [], put: [], confirm: [] },
    sdk: { initiate: [], put: [], confirm: [] },
    head: [],
  };
  progress(`initiate + confirm: warm-up, then ${count} uploads of 1 KiB per side, one at a time`);
  for (let i = 0; i < 5; i++) {
    await cofferUpload(project, body, `warm-${i}.bin`);
    await sdkSealedUpload(client, target.bucket, `${c.prefix}warm-${i}.bin`, body);
  }
  // Interleaved, so that a slow spell of the machine or the store hits both sides alike.
  for (let i = 0; i < count; i++) {
    const { times } = await cofferUpload(project, body, `small-${i}.bin`);
    result.coffer.initiate.push(times.initiate * 1000);
    result.coffer.put.push(times.put * 1000);
    result.coffer.confirm.push(times.confirm * 1000);
    const key = `${c.prefix}small-${i}.bin`;
    const sdk = await sdkSealedUpload(client, target.bucket, key, body);
    result.sdk.initiate.push(sdk.initiate * 1000);
    result.sdk.put.push(sdk.put * 1000);
    result.sdk.confirm.push(sdk.confirm * 1000);
    const t0 = performance.now();
    await client.send(new HeadObjectCommand({ Bucket: target.bucket, Key: key }));
    result.head.push(performance.now() - t0);
  }
  // Let the digest jobs of the last uploads finish before their objects go.
  await sleep(1000);
  await purge(client, target, `${project.id}/`);
  await purge(client, target, c.prefix);
  return result;
}

export interface MultipartRound {
  coffer: MultipartTimes;
  sdk: MultipartTimes;
  digest: number;
  serverCpu: number;
}

export async function multipartRounds(c: Context, mib: number, p: Plan): Promise<MultipartRound[]> {
  const { project, client, target, bench } = c;
  const expected = createHash('sha256')
    .update(c.data.subarray(0, mib * MiB))
    .digest('hex');
  const rounds: MultipartRound[] = [];
  for (let round = 1; round <= bench.rounds; round++) {
    const coffer: MultipartTimes[] = [];
    const sdk: MultipartTimes[] = [];
    const digest: number[] = [];
    const serverCpu: number[] = [];
    // Each object is deleted before the next upload: a memstore OSD holds about one at a time.
    for (const [i, side] of abba(round).entries()) {
      progress(`multipart ${fmt.size(mib)} round ${round}/${bench.rounds}: ${side}`);
      if (side === 'coffer') {
        const cpu = c.server.cpuSeconds();
        const upload = await cofferMultipart(project, c.data, p, `multipart-${mib}-${round}-${i}.bin`);
        serverCpu.push(c.server.cpuSeconds() - cpu);
        coffer.push(upload.times);
        digest.push(await settle(project, upload.fileId, expected));
        await purge(client, target, `${project.id}/`);
      } else {
        sdk.push(
          await sdkMultipart(client, target.bucket, `${c.prefix}multipart-${round}-${i}.bin`, c.data, p),
        );
        await purge(client, target, c.prefix);
      }
    }
    rounds.push({
      coffer: meanOf(coffer),
      sdk: meanOf(sdk),
      digest: Math.max(...digest),
      serverCpu: Math.max(...serverCpu),
    });
  }
  return rounds;
}
