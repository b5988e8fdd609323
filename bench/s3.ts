/**
 * Coffer on the S3 store against the bare AWS SDK, on the same S3 server in the same run. On S3 the bytes
 * go straight between the client and the bucket through presigned URLs, so all Coffer can add is its API
 * calls around the transfer; this measures how much that is:
 *   1. upload of COFFER_BENCH_S3_SIZE_MB (default 256) MiB: initiate → PUT to upload_url → confirm, timed
 *      as a whole and the PUT alone, against a PUT to a PutObject URL presigned by the SDK (ContentLength
 *      and Content-Type signed, as Coffer signs them);
 *   2. GET of that object: GET /download, then GET its URL, against a GetObject URL of the same key
 *      presigned by the SDK (plus, for information, the SDK's GET of its own PutObject object);
 *   3. latency of initiate and confirm (COFFER_BENCH_S3_SMALL_COUNT uploads of 1 KiB, one at a time),
 *      against the S3 calls they make (CreateMultipartUpload; the seal's HEAD, list, complete…) sent
 *      straight from the SDK;
 *   4. multipart upload of COFFER_BENCH_S3_MULTIPART_MB (default 1024) MiB in 16 parts,
 *      COFFER_BENCH_PARTS_IN_FLIGHT (default 4) at once: start → part-url (with size) + PUT → complete,
 *      against CreateMultipartUpload → presigned UploadPart + PUT → CompleteMultipartUpload from the SDK.
 * Every body is a view of one random buffer made at the start, sent from memory with undici. A round
 * runs each side twice, A B B A (B A A B the next round), and keeps the means; the table shows medians
 * over COFFER_BENCH_ROUNDS rounds.
 *
 * S3 server: the one of COFFER_BENCH_S3_ENDPOINT, COFFER_BENCH_S3_REGION (default us-east-1),
 * COFFER_BENCH_S3_ACCESS_KEY_ID, COFFER_BENCH_S3_SECRET_ACCESS_KEY and COFFER_BENCH_S3_BUCKET when set;
 * otherwise a private radosgw started with `bash .ci/rgw.sh start` in the scratch folder (memstore sized
 * for the run unless COFFER_RGW_MEMSTORE_MB says otherwise) and stopped at the end. A second Coffer
 * (child process, own data folder) is configured for that server.
 *
 * Memory of a memstore radosgw: its OSD keeps objects in RAM and hangs writes when full, and a deleted
 * object's bytes beyond its first 4 MiB are only freed by radosgw's garbage collector hours later. So
 * the bench deletes what it uploads after every round, and on its private radosgw also runs the garbage
 * collector then; an external memstore radosgw must hold everything the run writes (printed at start).
 */
import { createHash, randomFillSync } from 'node:crypto';
import { join } from 'node:path';
import { createProject, expectStatus } from './client.ts';
import { type CofferServer, startCoffer } from './coffer-server.ts';
import { type Bench, envInteger, MiB, progress } from './lib.ts';
import { fmt } from './measure.ts';
import { cofferMultipart, cofferUpload, settle } from './s3-coffer.ts';
import { drain } from './s3-http.ts';
import { latencySection, multipartSection, singleSection } from './s3-report.ts';
import { type Context, latencies, multipartRounds, singleRounds } from './s3-rounds.ts';
import { sdkGetUrl, sdkMultipart, sdkUpload } from './s3-sdk.ts';
import { externalTarget, MIN_PART_MIB, plan, purge, sdkClient, startRgw } from './s3-server.ts';

export const s3: Bench = {
  name: 's3',
  description:
    "S3 store: PUT/GET/multipart through Coffer's URLs vs bare SDK URLs; initiate + confirm latency",
  async run(context) {
    const mib = envInteger('COFFER_BENCH_S3_SIZE_MB', 256);
    const multipartMib = envInteger('COFFER_BENCH_S3_MULTIPART_MB', 1024, MIN_PART_MIB);
    const smallCount = envInteger('COFFER_BENCH_S3_SMALL_COUNT', 50);
    const inFlight = envInteger('COFFER_BENCH_PARTS_IN_FLIGHT', 4);
    const p = plan(multipartMib, inFlight);

    // Live bytes at once: five copies of the single object (two per side, the seal replay) or one
    // multipart object (deleted per side), plus what the garbage collector has not freed yet; twice
    // that leaves the OSD far from full.
    const memstoreMib = Math.max(4096, 2 * Math.max(5 * mib, multipartMib) + 1024);
    const target = externalTarget() ?? (await startRgw(join(context.scratch, 'rgw'), memstoreMib));
    const written = context.rounds * (5 * mib + 4 * multipartMib) + 4 * 64;
    progress(
      `S3 server: ${target.description}; the run writes about ${fmt.size(written)} (deleted after every round)`,
    );

    const data = Buffer.allocUnsafe(Math.max(mib, multipartMib, 64) * MiB);
    // randomFillSync fills at most 2 GiB per call.
    for (let offset = 0; offset < data.length; offset += 256 * MiB) {
      randomFillSync(data, offset, Math.min(256 * MiB, data.length - offset));
    }
    const client = sdkClient(target);
    let server: CofferServer | undefined;
    try {
      server = await startCoffer(join(context.scratch, 's3-data'), context.server.mode, {
        env: {
          COFFER_STORAGE: 's3',
          COFFER_S3_BUCKET: target.bucket,
          COFFER_S3_ENDPOINT: target.endpoint,
          COFFER_S3_REGION: target.region,
          COFFER_S3_ACCESS_KEY_ID: target.accessKeyId,
          COFFER_S3_SECRET_ACCESS_KEY: target.secretAccessKey,
          COFFER_S3_FORCE_PATH_STYLE: 'true',
        },
        // In this process too: the digest job sets the checksums the bench waits for.
        workers: true,
      });
      const project = await createProject(server);
      const c: Context = {
        bench: context,
        server,
        project,
        client,
        target,
        prefix: `bench-s3-${project.id}/`,
        data,
      };

      // Every path once (the first /download of a process takes ~40 ms), with connections to both servers.
      progress('warm-up: 64 MiB up and down, and a multipart of 64 MiB, through each side');
      const warm = data.subarray(0, 64 * MiB);
      const warmSha = createHash('sha256').update(warm).digest('hex');
      const { file } = await cofferUpload(project, warm, 'warm-up.bin');
      await settle(project, file.id, warmSha);
      const download = await project.api<{ url: string }>('GET', `/files/${file.id}/download`);
      expectStatus(download, 200, 'download URL');
      await drain(download.body.url, warm.length);
      await sdkUpload(client, target.bucket, `${c.prefix}warm-up.bin`, warm);
      await drain(await sdkGetUrl(client, target.bucket, `${c.prefix}warm-up.bin`), warm.length);
      const warmMultipart = await cofferMultipart(project, data, plan(64, inFlight), 'warm-up-parts.bin');
      await settle(project, warmMultipart.fileId, warmSha);
      await sdkMultipart(client, target.bucket, `${c.prefix}warm-up-parts.bin`, data, plan(64, inFlight));
      await purge(client, target, `${project.id}/`);
      await purge(client, target, c.prefix);

      // The small uploads first: by the large rounds, initiate and confirm run warm (JIT, pools).
      const small = await latencies(c, smallCount);
      const single = await singleRounds(c, mib);
      const multipart = await multipartRounds(c, multipartMib, p);
      const sections = [
        singleSection(mib, single),
        latencySection(smallCount, small),
        multipartSection(multipartMib, p, multipart),
      ];
      sections[0]!.notes.unshift(
        `S3 server: ${target.description}; Coffer: a second server (${server.mode === 'child' ? `child process, pid ${server.pid}` : 'in this process'}) ` +
          'with COFFER_STORAGE=s3 on its own data folder; client: undici in the bench process for every transfer, ' +
          'bodies sent from one buffer in memory',
      );
      return sections;
    } finally {
      await server?.close();
      client.destroy();
      await target.stop();
    }
  },
};
