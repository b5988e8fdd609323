import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { backend } from '../support/backends.ts';

// A benchmark is evidence, not a test: here each one only has to run to its end on a tiny size, on
// this run's database, and write its rows. No timing is asserted.
const ROOT = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'coffer-bench-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TINY: Record<string, string> = {
  COFFER_BENCH_SIZE_MB: '8',
  COFFER_BENCH_ROUNDS: '1',
  COFFER_BENCH_SMALL_COUNT: '20',
  COFFER_BENCH_HEALTH_COUNT: '50',
  COFFER_BENCH_DELIVERIES: '20',
  COFFER_BENCH_WEBHOOKS: '2',
  COFFER_BENCH_LIST_REQUESTS: '3',
  COFFER_BENCH_BACKUP_FILES: '500',
  COFFER_BENCH_SOAK_SECONDS: '6',
  COFFER_BENCH_SOAK_INTERVAL_SECONDS: '2',
  COFFER_BENCH_RENDERS: '2',
  COFFER_BENCH_RENDITION_REQUESTS: '5',
  COFFER_BENCH_BIG_RENDERS: '2',
  COFFER_BENCH_BIG_MP: '2',
};

interface JsonRow {
  section: string;
  name: string;
  value: number | null;
  unit: string | null;
  baseline: string | null;
  ratio: number | null;
  target: string | null;
  met: boolean | null;
}

function runBench(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: Record<string, string | undefined> = { ...process.env, ...TINY };
  // Only the run's own database, never a Coffer configuration of the environment.
  for (const name of Object.keys(env)) if (name.startsWith('COFFER_BENCH_S3')) delete env[name];
  env.COFFER_BENCH_DATABASE_URL = process.env.COFFER_TEST_DATABASE_URL;
  return new Promise((done) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench/run.ts'), ...args], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr = (stderr + text).slice(-20_000);
    });
    child.once('exit', (code) => done({ code, stdout, stderr }));
  });
}

describe('npm run bench', () => {
  it(
    'runs every benchmark on a tiny size and writes every row to --json',
    async () => {
      const db = backend === 'postgres' ? 'postgres' : 'pglite';
      const json = join(dir, `${db}.json`);
      const names = [
        'uploads',
        'multipart',
        'webhooks',
        's3api',
        'sdk',
        'startup',
        'tracing',
        'list',
        'backup',
        'renditions',
        'soak',
      ];
      const run = await runBench([...names, '--db', db, '--json', json, '--files', '2000']);
      expect(run.code, run.stderr).toBe(0);

      const report = JSON.parse(readFileSync(json, 'utf8')) as { db: string; rows: JsonRow[] };
      expect(report.db).toBe(db);
      const row = (section: RegExp, name: RegExp) => {
        const found = report.rows.find((r) => section.test(r.section) && name.test(r.name));
        expect(
          found,
          `${section} / ${name} in ${JSON.stringify(report.rows.map((r) => r.name))}`,
        ).toBeDefined();
        return found!;
      };
      // Small uploads against B1, with their targets.
      const b1 = row(/^Small uploads/, /^B1/);
      expect(b1.value).toBeGreaterThan(0);
      for (const [name, target] of [
        [/^initiate/, '≥ 60%'],
        [/^confirm/, '≥ 50%'],
        [/^PUT 1 KiB/, '≥ 40%'],
        [/^small uploads/, '≥ 25%'],
      ] as const) {
        const step = row(/^Small uploads/, name);
        expect(step.ratio).toBeGreaterThan(0);
        expect(step.target).toBe(target);
        expect(typeof step.met).toBe('boolean');
      }
      expect(row(/^Small uploads/, /server CPU per upload/).unit).toBe('ms');
      expect(row(/^Large object/, /^PUT 8 MiB vs minimal node:http/).ratio).toBeGreaterThan(0);
      row(/^Multipart|multipart/i, /./);
      expect(row(/^Image renditions/, /^render 12 MP JPEG/).ratio).toBeGreaterThan(0);
      expect(row(/^Image renditions/, /behind a bare node:http server/).ratio).toBeGreaterThan(0);
      expect(row(/^Image renditions/, /server memory growth/).unit).toBe('MiB');
      expect(row(/[Ww]ebhook/, /./)).toBeDefined();
      expect(row(/SDK|sdk|@coffer\/client/, /./)).toBeDefined();
      // The S3 endpoint through @aws-sdk/client-s3, against B1 and a private radosgw of its own.
      for (const [name, target] of [
        [/^PutObject 1 KiB vs B1/, '≥ 50%'],
        [/^PutObject 1 KiB vs radosgw/, '≥ 100%'],
        [/^GetObject 1 KiB vs radosgw/, '≥ 100%'],
        [/^multipart upload 8 MiB/, '≥ 90%'],
        [/^GetObject 8 MiB/, '≥ 90%'],
      ] as const) {
        const step = row(/^S3 API/, name);
        expect(step.ratio).toBeGreaterThan(0);
        expect(step.target).toBe(target);
        expect(typeof step.met).toBe('boolean');
      }
      const pages = row(/^S3 API: ListObjectsV2/, /^every page of a walk/);
      expect(pages.unit).toBe('ms p99');
      expect(pages.value).toBeGreaterThan(0);
      expect(pages.target).toBe('p99 ≤ 50 ms');
      expect(row(/^Start-up/, /restart$/).unit).toBe('s');
      expect(row(/^Backup of an embedded database of 500 files/, /^snapshot memory/).unit).toBe('MiB');
      expect(row(/^Start-up/, /^idle RSS after a restart/).value).toBeGreaterThan(0);
      const traced = row(/^Tracing/, /^server CPU per upload, tracing on/);
      expect(traced.ratio).toBeGreaterThan(0);
      expect(traced.target).toBe('≤ 115%');
      if (db === 'postgres') {
        expect(row(/^Listing/, /^first page/).unit).toBe('ms p99');
        for (const filter of [
          /q \(/,
          /tags/,
          /category$/,
          /status/,
          /date range/,
          /size range/,
          /metadata/,
          /folder$/,
        ]) {
          expect(row(/^Listing/, new RegExp(`^filter: .*${filter.source}`)).target).toBe('p99 ≤ 50 ms');
        }
      }
      for (const name of [/^server RSS/, /^open file descriptors/, /^database connections/, /^p99 latency/])
        expect(typeof row(/^Soak/, name).met).toBe('boolean');
      expect(row(/^Soak/, /^webhook events delivered/).met).toBe(true);
      for (const r of report.rows) expect(r.name, JSON.stringify(r)).not.toBe('');
    },
    15 * 60_000,
  );
});
