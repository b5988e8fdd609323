#!/usr/bin/env node
/**
 * The entry point. When the OTEL_* variables ask for traces, tracing starts before the rest of
 * Coffer is loaded (its instrumentations patch libraries as they are imported); otherwise nothing
 * of OpenTelemetry is loaded at all. A server or worker first starts itself again with glibc's malloc
 * thresholds fixed and a smaller young generation (lean-process.ts).
 */
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';
import { ConfigError, tracingRequested } from './config.ts';
import { restartLean } from './lean-process.ts';

/** The commands that run until stopped, where idle memory counts. */
const LONG_RUNNING = new Set(['serve', 'worker']);

async function start(argv: string[]): Promise<void> {
  if (LONG_RUNNING.has(argv[0] ?? 'serve')) restartLean();
  // Node.js keeps the modules it compiled (TypeScript stripped, then compiled to bytecode) beside the
  // installed packages, where only their owner writes (not a shared temporary folder), so that the next
  // start skips that work. NODE_COMPILE_CACHE=DIR moves it, NODE_DISABLE_COMPILE_CACHE=1 turns it off.
  enableCompileCache(join(import.meta.dirname, '../node_modules/.cache/coffer/compile'));
  let stopTracing: (() => Promise<void>) | undefined;
  if (tracingRequested()) {
    const { startTracing } = await import('./tracing.ts');
    stopTracing = await startTracing(argv[0] ?? 'serve');
    // A command that ends by itself (migrate, admin…) sends its spans before the process exits.
    process.once('beforeExit', () => void stopTracing?.());
  }
  const { main } = await import('./commands.ts');
  await main(argv, { beforeExit: stopTracing });
}

start(process.argv.slice(2)).catch(async (error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`Invalid configuration: ${error.message}\n`);
    process.exit(2);
  }
  const { DatabaseInUseError } = await import('./infra/db.ts');
  if (error instanceof DatabaseInUseError) {
    process.stderr.write(`coffer: ${error.message}\n`);
    process.exit(1);
  }
  process.stderr.write(
    `coffer: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
