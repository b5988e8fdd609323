/** Multipart uploads through the S3 endpoint, against `dd` writing as much. */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { expectStatus } from './client.ts';
import { rawWrite } from './disk.ts';
import { type BenchContext, MiB, progress } from './lib.ts';
import { fmt, mean, pool } from './measure.ts';
import { abba, type Plan, type Side } from './s3-server.ts';
import { CONTENT_TYPE, drainObject, type Project, type Sides, seconds } from './s3api-bucket.ts';
import type { MultipartRound } from './s3api-report.ts';

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

export async function multipartRounds(
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
export async function checksummed(project: Project): Promise<void> {
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
