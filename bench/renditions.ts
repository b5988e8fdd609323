/**
 * Image renditions (GET …/files/{id}/render and presigned rendition URLs), each against a baseline of
 * the same run:
 *   1. a 12 MP JPEG rendered to a 400 px WebP through Coffer (a new quality each time, so each is a
 *      render, not a cache hit), against sharp called directly in this process on the same bytes; in
 *      the same loop, the same render behind a bare node:http server (bench/reference-server.ts: sharp on
 *      the source's path, no framework, credential, database or store), and what a request around a render
 *      costs: a request that server answers at once and a revalidation of a rendition through Coffer (a
 *      304: the request path and the file's statement, nothing rendered or read);
 *   2. a stored rendition served through its presigned URL, against the presigned download of a plain
 *      file of the same size (COFFER_BENCH_RENDITION_REQUESTS each, 8 in flight);
 *   3. 8 renders at once of different 50 MP JPEGs: the server's memory growth (peak RSS − RSS before)
 *      (COFFER_BENCH_BIG_RENDERS, COFFER_BENCH_BIG_MP).
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import sharp from 'sharp';
import { request } from 'undici';

// As the server runs it: libvips' operation cache off (it would keep the decoded source between renders).
sharp.cache(false);

import { agent, createProject, expectStatus, type Project } from './client.ts';
import { startReference } from './helper-servers.ts';
import { type Bench, envInteger, MiB, progress } from './lib.ts';
import { fmt, measure, median, pool } from './measure.ts';
import type { Row } from './report.ts';

const RENDER_TARGET = 0.9;
const SERVE_TARGET = 0.9;
const MEMORY_LIMIT = 512 * MiB;
/** Waited before the renders are timed (see the wait). */
const SETTLE_MS = 2500;
/** Idle time before each request measured around the renders: about what sharp takes for one here. */
const IDLE_MS = 20;
/** The third measurement's renders at once, and their sources' size in megapixels. */
const BIG_RENDERS = envInteger('COFFER_BENCH_BIG_RENDERS', 8);
const BIG_MEGAPIXELS = envInteger('COFFER_BENCH_BIG_MP', 50);

/** initiate → PUT through the presigned URL → confirm; answers the file id. */
async function upload(
  project: Project,
  filename: string,
  contentType: string,
  bytes: Buffer,
): Promise<string> {
  const started = await project.api<{ file_id: string; upload_url: string }>('POST', '/files/upload', {
    filename,
    content_type: contentType,
    size_bytes: bytes.length,
  });
  expectStatus(started, 201, 'initiate');
  const put = await request(started.body.upload_url, {
    method: 'PUT',
    body: bytes,
    headers: { 'content-type': contentType },
    dispatcher: agent,
  });
  await put.body.dump();
  if (put.statusCode !== 200) throw new Error(`PUT: ${put.statusCode}`);
  expectStatus(await project.api('POST', `/files/${started.body.file_id}/confirm`), 200, 'confirm');
  return started.body.file_id;
}

/** A photo-like JPEG (smooth, with some detail) of width × height, made from a small noise image scaled up. */
async function photo(width: number, height: number, seed: number): Promise<Buffer> {
  const noise = await sharp({
    create: {
      width: 64,
      height: 48,
      channels: 3,
      background: '#000',
      noise: { type: 'gaussian', mean: 120 + seed, sigma: 50 },
    },
  })
    .png()
    .toBuffer();
  return sharp(noise).resize(width, height, { kernel: 'cubic' }).jpeg({ quality: 85 }).toBuffer();
}

/** GETs `url` and reads the whole body, expecting `status`; answers its size. */
async function fetchAll(url: string, headers: Record<string, string> = {}, status = 200): Promise<number> {
  const response = await request(url, { headers, dispatcher: agent });
  const body = Buffer.from(await response.body.arrayBuffer());
  if (response.statusCode !== status)
    throw new Error(`GET ${url}: ${response.statusCode} ${body.toString().slice(0, 200)}`);
  return body.length;
}

/** Milliseconds `work` takes. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

export const renditions: Bench = {
  name: 'renditions',
  description:
    'image renditions: render vs sharp directly, cached serve vs plain download, memory of 50 MP renders',
  async run(context) {
    const { server, rounds } = context;
    const renders = envInteger('COFFER_BENCH_RENDERS', 10 * rounds);
    const requests = envInteger('COFFER_BENCH_RENDITION_REQUESTS', 1000);
    const project = await createProject(server);
    const rows: Row[] = [];
    const auth = { authorization: `Bearer ${project.key}` };

    progress('renditions: a 12 MP JPEG to 400 px WebP');
    const source = await photo(4000, 3000, 0);
    const sourceId = await upload(project, 'photo.jpg', 'image/jpeg', source);
    const renderUrl = (quality: number) =>
      `${server.url}/v1/projects/${project.id}/files/${sourceId}/render?width=400&format=webp&quality=${quality}`;
    const warmUp = await request(renderUrl(100), { headers: auth, dispatcher: agent });
    await warmUp.body.dump(); // also of sharp's first load in the server
    if (warmUp.statusCode !== 200) throw new Error(`the warm-up render: ${warmUp.statusCode}`);
    const revalidate = { ...auth, 'if-none-match': String(warmUp.headers.etag) };
    await sharp(source).rotate().resize({ width: 400 }).webp({ quality: 100 }).toBuffer();
    const reference = await startReference(join(context.scratch, 'reference'));
    const stored = await request(`${reference.url}/photo`, {
      method: 'PUT',
      body: source,
      dispatcher: agent,
    });
    await stored.body.dump();
    await fetchAll(`${reference.url}/photo?render=100`); // also of sharp's first load there
    // A new server runs every periodic task once, a second or so after it starts (30 ms of the embedded
    // engine's thread on a new database): start-up maintenance, not part of any render.
    await sleep(SETTLE_MS);
    // Interleaved, so that other work on the machine weighs on both sides alike. After each pair, the
    // requests around a render, each after 20 ms in which the servers idle, as they do while this
    // process renders before each request of a render.
    let directSeconds = 0;
    let cofferSeconds = 0;
    let bareSeconds = 0;
    const bareMs: number[] = [];
    const revalidationMs: number[] = [];
    for (let i = 0; i < renders; i++) {
      const started = performance.now();
      await sharp(source, { autoOrient: true })
        .resize({ width: 400 })
        .webp({ quality: 20 + i })
        .toBuffer();
      directSeconds += (performance.now() - started) / 1000;
      // The two renders behind HTTP in turns, so that neither always follows the other.
      const throughCoffer = async () => {
        cofferSeconds += (await timed(() => fetchAll(renderUrl(20 + i), auth))) / 1000;
      };
      const throughBare = async () => {
        bareSeconds += (await timed(() => fetchAll(`${reference.url}/photo?render=${20 + i}`))) / 1000;
      };
      for (const render of i % 2 === 0 ? [throughCoffer, throughBare] : [throughBare, throughCoffer])
        await render();
      await sleep(IDLE_MS);
      bareMs.push(await timed(() => fetchAll(`${reference.url}/`, {}, 204)));
      await sleep(IDLE_MS);
      revalidationMs.push(await timed(() => fetchAll(renderUrl(100), revalidate, 304)));
    }
    await reference.close();
    const direct = { seconds: directSeconds };
    const viaCoffer = { seconds: cofferSeconds };
    const renderRatio = direct.seconds / viaCoffer.seconds;
    rows.push({
      benchmark: `render 12 MP JPEG → 400 px WebP (${renders}, one at a time)`,
      coffer: `${((viaCoffer.seconds / renders) * 1000).toFixed(0)} ms/render`,
      baseline: `${((direct.seconds / renders) * 1000).toFixed(0)} ms (sharp directly)`,
      ratio: renderRatio,
      target: `≥ ${fmt.ratio(RENDER_TARGET)}`,
      met: renderRatio >= RENDER_TARGET,
      value: (viaCoffer.seconds / renders) * 1000,
      unit: 'ms',
    });
    rows.push({
      benchmark: `the same render behind a bare node:http server (${renders}, one at a time)`,
      coffer: `${((bareSeconds / renders) * 1000).toFixed(0)} ms/render (bare server)`,
      baseline: `${((direct.seconds / renders) * 1000).toFixed(0)} ms (sharp directly)`,
      ratio: direct.seconds / bareSeconds,
      target: 'what HTTP alone allows',
    });

    progress('renditions: a stored rendition against a plain download of the same size');
    const linked = await project.api<{ url: string }>(
      'GET',
      `/files/${sourceId}/download?width=1600&format=jpeg&quality=80&ttl=3600`,
    );
    expectStatus(linked, 200, 'rendition URL');
    const size = await fetchAll(linked.body.url); // made and stored
    const plainId = await upload(project, 'plain.bin', 'application/octet-stream', Buffer.alloc(size, 7));
    const plain = await project.api<{ url: string }>('GET', `/files/${plainId}/download?ttl=3600`);
    expectStatus(plain, 200, 'download URL');
    const serveAll = (url: string) => pool(requests, 8, async () => void (await fetchAll(url)));
    await serveAll(plain.body.url);
    await serveAll(linked.body.url);
    const plainRun = await measure(server, () => serveAll(plain.body.url));
    const cachedRun = await measure(server, () => serveAll(linked.body.url));
    const serveRatio = plainRun.seconds / cachedRun.seconds;
    /** The server's CPU per request: steadier than the rate on a shared machine. */
    const cpuPerRequest = (cpuSeconds: number) => `${((cpuSeconds / requests) * 1e6).toFixed(0)} µs CPU/req`;
    rows.push({
      benchmark: `serve a stored rendition of ${fmt.mib(size)} (${requests}, 8 in flight)`,
      coffer: `${fmt.perSecond(requests / cachedRun.seconds, 'req')}, ${cpuPerRequest(cachedRun.serverCpu)}`,
      baseline: `${fmt.perSecond(requests / plainRun.seconds, 'req')}, ${cpuPerRequest(plainRun.serverCpu)} (plain download)`,
      ratio: serveRatio,
      target: `≥ ${fmt.ratio(SERVE_TARGET)}`,
      met: serveRatio >= SERVE_TARGET,
    });

    progress(`renditions: ${BIG_RENDERS} renders at once of ${BIG_MEGAPIXELS} MP JPEGs`);
    const bigIds: string[] = [];
    for (let i = 0; i < BIG_RENDERS; i++) {
      const width = Math.floor(Math.sqrt(BIG_MEGAPIXELS * 1e6 * (4 / 3)));
      const height = Math.floor((BIG_MEGAPIXELS * 1e6) / width);
      bigIds.push(await upload(project, `big-${i}.jpg`, 'image/jpeg', await photo(width, height, i)));
    }
    const big = await measure(server, () =>
      Promise.all(
        bigIds.map((id, i) =>
          fetchAll(
            `${server.url}/v1/projects/${project.id}/files/${id}/render?width=${1000 + i}&format=webp`,
            auth,
          ),
        ),
      ),
    );
    const growth = big.memory.peak - big.memory.before;
    rows.push({
      benchmark: `${BIG_RENDERS} renders at once of ${BIG_MEGAPIXELS} MP JPEGs (server memory growth)`,
      coffer: `+${fmt.mib(growth)}`,
      baseline: `${fmt.mib(big.memory.before)} → peak ${fmt.mib(big.memory.peak)}`,
      target: `< ${fmt.mib(MEMORY_LIMIT)}`,
      met: growth < MEMORY_LIMIT,
      value: growth / MiB,
      unit: 'MiB',
    });

    return [
      {
        title: 'Image renditions',
        rows,
        notes: [
          'render: each Coffer request asks a quality not asked before, so each is a render (read from the store, decoded, resized, encoded; stored after the answer); sharp directly decodes, resizes and encodes the same bytes in this process',
          `around a render, in the same loop: a render through Coffer took ${fmt.ms(((cofferSeconds - directSeconds) / renders) * 1000)} more than sharp directly and ${fmt.ms(((cofferSeconds - bareSeconds) / renders) * 1000)} more than behind the bare server (means), so Coffer's own part is ${fmt.ratio(bareSeconds / cofferSeconds)} of the bare server's rate; medians: a request answered at once by the bare server took ${fmt.ms(median(bareMs))}, a revalidation of a rendition through Coffer (304: its request path and the file's statement) ${fmt.ms(median(revalidationMs))}`,
          'serve: presigned rendition URL (a stored rendition) vs presigned download URL of a file of the same size, no key on either',
          `memory: ${BIG_RENDERS} different ${BIG_MEGAPIXELS} MP sources at once, at most COFFER_RENDER_CONCURRENCY (the CPU count) rendering, the others queued`,
        ],
      },
    ];
  },
};
