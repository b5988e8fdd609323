/**
 * What every benchmark shares: sizes, output (results on stdout, progress on stderr), clean-ups run
 * at exit, scratch folders, and the `Bench` that each module (bench/uploads.ts, …) exports for
 * bench/run.ts. The rest is by concern: coffer-server.ts, helper-servers.ts, client.ts, disk.ts,
 * proc.ts, measure.ts and report.ts.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CofferServer } from './coffer-server.ts';
import type { DbKind } from './database.ts';
import type { Section } from './report.ts';

export const KiB = 1024;
export const MiB = 1024 * 1024;
export const ROOT = resolve(import.meta.dirname, '..');
export const ADMIN_KEY = `coffer_admin_${'b'.repeat(43)}`;

export function out(line = ''): void {
  process.stdout.write(`${line}\n`);
}

/** A progress line on stderr, so that stdout keeps only the results. */
export function progress(line: string): void {
  process.stderr.write(`  … ${line}\n`);
}

const cleanups: (() => void)[] = [];

/** Registers a synchronous cleanup, run once at exit (normal, error or signal), newest first. */
export function onCleanup(cleanup: () => void): void {
  cleanups.push(cleanup);
}

export function cleanupNow(): void {
  for (let cleanup = cleanups.pop(); cleanup; cleanup = cleanups.pop()) {
    try {
      cleanup();
    } catch {
      // keep cleaning the rest
    }
  }
}

process.on('exit', cleanupNow);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
    cleanupNow();
    process.exit(130);
  });
}

/** A fresh scratch folder under the project's .tmp/ (git-ignored), removed at exit. */
export function scratchDir(prefix: string): string {
  const parent = join(ROOT, '.tmp');
  mkdirSync(parent, { recursive: true });
  const dir = mkdtempSync(join(parent, `${prefix}-`));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface BenchContext {
  server: CofferServer;
  /** The database of every Coffer server of the run (`--db`). */
  db: DbKind;
  /** `--name value` options of the command line that are not the runner's own (e.g. `--files` of list). */
  options: Map<string, string>;
  /** A scratch folder on the same filesystem as the server's data directory (raw baselines go here). */
  scratch: string;
  /** The large transfer size, in MiB (COFFER_BENCH_SIZE_MB, default 1024). */
  sizeMib: number;
  /** Repetitions of each large measurement (COFFER_BENCH_ROUNDS, default 3). */
  rounds: number;
  /** Whether the page cache can be dropped (root): reads are then cold on both sides. */
  canDropCaches: boolean;
}

export interface Bench {
  name: string;
  description: string;
  run(context: BenchContext): Promise<Section[]>;
}

export function envInteger(name: string, fallback: number, min = 1): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min)
    throw new Error(`${name}: expected an integer ≥ ${min}, got ${raw}`);
  return value;
}
