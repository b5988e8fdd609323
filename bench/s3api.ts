/**
 * Coffer's S3-compatible endpoint (/s3) with the real @aws-sdk/client-s3 as the client, against the same
 * client and configuration on a private radosgw (bench/s3-server.ts) in the same run. Coffer keeps its
 * bytes on its local store and runs on the run's database (`--db`); a long-lived S3 credential of a
 * project is made with the admin key, and the server's rate limits are off (they would cap the rates):
 *   1. PutObject of 1 KiB, COFFER_BENCH_CONCURRENCY (16) in flight, COFFER_BENCH_SMALL_COUNT (2000) per
 *      run: against B1 (bench/small-uploads.ts: one INSERT behind a bare Fastify route, before and after) and
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
import { join } from 'node:path';
import { HeadBucketCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { createProject, purgeFiles } from './client.ts';
import { startCoffer } from './coffer-server.ts';
import { type Bench, envInteger, KiB, MiB, progress } from './lib.ts';
import { latencies } from './list.ts';
import type { Section } from './report.ts';
import { externalTarget, plan, purge, sdkClient, startRgw } from './s3-server.ts';
import { NO_RATE_LIMITS, type Sides, s3Bucket } from './s3api-bucket.ts';
import { seedListing, walk } from './s3api-listing.ts';
import { checksummed, multipartRounds } from './s3api-multipart.ts';
import { dbName, listingSection, multipartSection, PAGE_KEYS, smallSection } from './s3api-report.ts';
import { restBaselines, smallRounds } from './s3api-small.ts';

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
