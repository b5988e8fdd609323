/**
 * Upload and download throughput of the two-step presigned flow, and the server's memory while it moves
 * large objects:
 *   1. small uploads per second (initiate + PUT 1 KiB + confirm), against GET /health/live requests per second,
 *      B1 (one INSERT behind a bare Fastify route) and D1 (a durable 1 KiB write on the same disk);
 *   2. PUT of a large object through its presigned URL, against `dd` writing as much with fdatasync;
 *   3. GET of it through a presigned download URL, against `dd` reading the same size (cold caches when possible);
 *   4. the server's RSS before, during (peak) and after each transfer, at two sizes.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createProject } from './client.ts';
import { rawWrite } from './disk.ts';
import { startReference } from './helper-servers.ts';
import {
  growth,
  MEMORY_LIMIT,
  repeated,
  type TransferResult,
  transferSection,
  transfers,
} from './large-transfers.ts';
import { type Bench, MiB, progress } from './lib.ts';
import { fmt } from './measure.ts';
import { retainedRssRow, type Section } from './report.ts';
import { smallUploads } from './small-uploads.ts';
import { initiate, put } from './upload-flow.ts';

export const uploads: Bench = {
  name: 'uploads',
  description: 'small uploads/s; large PUT and GET through presigned URLs vs raw disk; server RSS',
  async run(context) {
    const { server, sizeMib, canDropCaches } = context;
    const project = await createProject(server);
    const sections: Section[] = [await smallUploads(context, project)];

    const chunk = randomBytes(MiB);
    const smallMib = Math.max(1, Math.floor(sizeMib / 4));
    const sizes = smallMib < sizeMib ? [smallMib, sizeMib] : [sizeMib];
    const reference = await startReference(join(context.scratch, 'reference'));
    const results: TransferResult[] = [];
    let startRss: number;
    try {
      // A discarded write first: this VM's disk is markedly slower on the first write after idling.
      progress('warm-up: dd write of 64 MiB, PUT of 64 MiB');
      const warm = join(context.scratch, 'warm-up');
      await rawWrite(warm, 64);
      rmSync(warm, { force: true });
      startRss = server.rss();
      const warmUp = await initiate(project, 'warm-up.bin', 64 * MiB);
      await put(warmUp.upload_url, 64 * MiB, Readable.from(repeated(chunk, 64), { objectMode: false }));
      for (const mib of sizes) results.push(await transfers(context, project, reference, chunk, mib));
    } finally {
      await reference.close();
    }
    const endRss = server.rss();
    for (const result of results) sections.push(transferSection(result));

    const summary: Section = {
      title: 'Server memory across all large transfers',
      rows: [retainedRssRow('server RSS retained after all transfers', startRss, endRss, MEMORY_LIMIT)],
      notes: [
        server.mode === 'child'
          ? `RSS is the Coffer server process's (pid ${server.pid}), read from /proc/<pid>/status; peak = max of 10 ms samples and VmHWM (reset through clear_refs before each transfer)`
          : 'in-process mode: RSS and CPU are the whole process (server and client together), so "server" and "client" CPU show the same figure',
        canDropCaches
          ? 'page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every write and every read, on every side'
          : 'the page cache could not be dropped (not root): reads on every side may be warm',
        'dd baselines: bs=1M in the same filesystem (write: if=/dev/zero conv=fdatasync; read: of=/dev/null); a Coffer PUT answers only after its own fsync',
        'minimal node:http: bench/reference-server.ts in its own process, hashing (SHA-256) and fsyncing as Coffer does, without framework, signature checks, database or sidecar',
      ],
    };
    if (results.length === 2) {
      const [small, large] = results as [TransferResult, TransferResult];
      const worst = (result: TransferResult) =>
        Math.max(...result.rounds.flatMap((r) => [growth(r.put), growth(r.get)]));
      const extra = (large.mib - small.mib) * MiB;
      const difference = worst(large) - worst(small);
      summary.rows.push({
        benchmark: `RSS growth ${fmt.size(large.mib)} vs ${fmt.size(small.mib)}`,
        coffer: `+${fmt.mib(worst(large))} vs +${fmt.mib(worst(small))}`,
        baseline: `${fmt.mib(extra)} more bytes`,
        ratio: Math.max(0, difference) / extra,
        target: '≈ 0% (flat)',
        met: difference < Math.max(0.05 * extra, 16 * MiB) && worst(large) < MEMORY_LIMIT,
      });
      summary.notes.push(
        `"RSS growth … vs …": the extra peak growth at ${fmt.size(large.mib)} over ${fmt.size(small.mib)}, per extra byte moved (≈ 100% if memory grew with size); met when under 5% of the extra bytes (at least 16 MiB of slack)`,
      );
    }
    sections.push(summary);
    return sections;
  },
};
