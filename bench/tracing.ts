/**
 * What OpenTelemetry tracing costs the server: the small uploads of bench/uploads.ts (initiate + PUT
 * 1 KiB + confirm) against two Coffer servers started for the run, one with tracing off (no OTEL_*
 * variable: nothing of OpenTelemetry is loaded) and one with every request sampled and its spans
 * exported over OTLP/HTTP to a sink in this process. Rounds alternate off, on, on, off, so that a
 * drift of the machine's load weighs on both sides alike; the measure is server CPU per upload.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createProject, type Project } from './client.ts';
import { type CofferServer, startCoffer } from './coffer-server.ts';
import { type Bench, type BenchContext, envInteger, KiB, progress, scratchDir } from './lib.ts';
import { fmt, pool } from './measure.ts';
import type { Section } from './report.ts';
import { confirm, initiate, put } from './upload-flow.ts';

/** Server CPU per upload with tracing on, as a share of the same with tracing off. */
const OVERHEAD_TARGET = 1.15;

/** An OTLP/HTTP trace receiver that counts what it is sent and keeps nothing. */
async function startSink(): Promise<{ url: string; spans(): number; close(): Promise<void> }> {
  let spans = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      spans += body.split('"spanId"').length - 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

interface Side {
  name: 'off' | 'on';
  server: CofferServer;
  project: Project;
  cpuSeconds: number;
  seconds: number;
  uploads: number;
}

export const tracing: Bench = {
  name: 'tracing',
  description: 'small uploads with tracing on (every request sampled, OTLP to a local sink) against off',
  async run(_context: BenchContext): Promise<Section[]> {
    const count = envInteger('COFFER_BENCH_SMALL_COUNT', 2000);
    const concurrency = envInteger('COFFER_BENCH_CONCURRENCY', 16);
    const warmUp = Math.min(200, count);
    const payload = randomBytes(KiB);
    const sink = await startSink();
    const scratch = scratchDir('tracing');
    // Children only: tracing starts in src/main.ts, before the rest of Coffer loads.
    const start = async (name: Side['name'], env: Record<string, string>): Promise<Side> => {
      const server = await startCoffer(join(scratch, name), 'child', { env });
      return { name, server, project: await createProject(server), cpuSeconds: 0, seconds: 0, uploads: 0 };
    };
    const off = await start('off', {});
    const on = await start('on', {
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_SERVICE_NAME: 'coffer-bench',
    });
    const uploads = async (side: Side, n: number, record: boolean) => {
      const cpu = side.server.cpuSeconds();
      const started = performance.now();
      await pool(n, concurrency, async (i) => {
        const file = await initiate(side.project, `small-${i}.bin`, payload.length);
        await put(file.upload_url, payload.length, payload);
        const confirmed = await confirm(side.project, file.file_id);
        if (confirmed.status !== 'ready') throw new Error(`confirm: the file is ${confirmed.status}`);
      });
      if (!record) return;
      side.cpuSeconds += side.server.cpuSeconds() - cpu;
      side.seconds += (performance.now() - started) / 1000;
      side.uploads += n;
    };

    try {
      progress(`warm-up: ${warmUp} small uploads on each server`);
      for (const side of [off, on]) await uploads(side, warmUp, false);
      const round = Math.ceil(count / 2);
      for (const side of [off, on, on, off]) {
        progress(`small uploads × ${round}, tracing ${side.name}, ${concurrency} in flight`);
        await uploads(side, round, true);
      }
    } finally {
      await Promise.all([off.server.close(), on.server.close()]);
      await sink.close();
    }

    const cpuMs = (side: Side) => (side.cpuSeconds / side.uploads) * 1000;
    const rate = (side: Side) => side.uploads / side.seconds;
    const ratio = cpuMs(on) / cpuMs(off);
    return [
      {
        title: `Tracing: small uploads (1 KiB), ${on.uploads} a side, ${concurrency} in flight`,
        rows: [
          {
            benchmark: 'server CPU per upload, tracing on',
            coffer: fmt.ms(cpuMs(on)),
            baseline: `${fmt.ms(cpuMs(off))} tracing off`,
            ratio,
            target: `≤ ${fmt.ratio(OVERHEAD_TARGET)}`,
            met: ratio <= OVERHEAD_TARGET,
          },
          {
            benchmark: 'uploads/s, tracing on',
            coffer: fmt.perSecond(rate(on), 'uploads'),
            baseline: `${fmt.perSecond(rate(off), 'uploads')} tracing off`,
            ratio: rate(on) / rate(off),
          },
        ],
        notes: [
          `spans exported by the traced server: ${sink.spans()} (${(sink.spans() / (on.uploads + warmUp)).toFixed(1)} per upload, warm-up included, and its background work)`,
          'tracing off loads nothing of OpenTelemetry: the span helpers call straight through, so off is the code as it was',
        ],
      },
    ];
  },
};
