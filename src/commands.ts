/**
 * Coffer's commands, loaded by main.ts once tracing (when asked for) has started.
 */
import { flushCompileCache } from 'node:module';
import { parseArgs } from 'node:util';
import type { Logger } from 'pino';
import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';
import { serveMetrics } from './infra/metrics.ts';
import { migrate } from './infra/migrate.ts';
import { CLI_AUDIT } from './modules/audit/service.ts';
import { serveBackups } from './modules/backups/control.ts';
import { SCOPES } from './modules/projects/schemas.ts';
import { createLogger, openDatabase, openRuntime, type Runtime } from './runtime.ts';
import { startWorkers } from './workers.ts';

/** How long in-flight requests get to finish on SIGTERM/SIGINT before their connections are cut. */
const SHUTDOWN_GRACE_MS = 10_000;

const USAGE = `Usage: coffer <command>

Commands:
  serve                 run the API and the background workers (default)
  worker                run the background workers only
  migrate               apply pending database migrations and exit
  admin bootstrap [--org NAME] [--project NAME]
                        create an organization, a project and an API key with every scope
  upload, ls, download, rm
                        client commands against a running Coffer (coffer help client)
  backup DIR            copy the embedded database and the objects into DIR, also while serving
  restore DIR [--force] restore a backup into COFFER_DATA_DIR (coffer help backup)
`;

/** The CLI's own output: what the operator asked to see (never routed through the logger). */
function print(text: string): void {
  process.stdout.write(`${text}\n`);
}

/** The admin key this start generated, if any: whichever command starts first is the only one to see it. */
function printGeneratedAdminKey(runtime: Runtime): void {
  if (!runtime.generatedAdminKey) return;
  print(
    `\nGenerated the admin key (shown only this once; only its hash is stored):\n\n  ${runtime.generatedAdminKey}\n\nSet COFFER_ADMIN_KEY to use a key of your own.\n`,
  );
}

async function serve(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config);
  const runtime = await openRuntime(config, { logger });
  printGeneratedAdminKey(runtime);
  const app = await buildApp({ config, services: runtime.services, logger });
  const metrics = await serveMetrics(config.metrics, runtime.services.metrics, logger);
  const backups = await serveBackups(config, runtime.services, logger);
  const workers = startWorkers(runtime.services.workers(), logger);
  onShutdown(logger, async () => {
    // Stops accepting, lets in-flight requests and worker runs finish, then releases the pools.
    // A client that stops reading a download must not hold the shutdown forever.
    setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
    await app.close();
    await backups.close(); // a backup in progress holds the collector's deletions
    await workers.stop();
    await metrics?.close();
    await runtime.close();
  });
  await app.listen({ port: config.port, host: config.host });
  // Every module a server needs is loaded now: keep their compiled code for the next start even if
  // this process is killed instead of exiting.
  flushCompileCache();
}

async function work(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config);
  const runtime = await openRuntime(config, { logger });
  const metrics = await serveMetrics(config.metrics, runtime.services.metrics, logger);
  const backups = await serveBackups(config, runtime.services, logger);
  const workers = startWorkers(runtime.services.workers(), logger);
  onShutdown(logger, async () => {
    await backups.close();
    await workers.stop();
    await metrics?.close();
    await runtime.close();
  });
  // The worker may be the first process on a fresh database: then it alone can show the key.
  printGeneratedAdminKey(runtime);
  flushCompileCache(); // as for serve
  logger.info('workers started');
}

/** What the process runs last on every way out (main.ts: flushing the spans when tracing). */
let beforeExit: () => Promise<void> = async () => {};

function onShutdown(logger: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    await close();
    await beforeExit();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

async function runMigrate(): Promise<void> {
  const config = loadConfig();
  const db = await openDatabase(config);
  try {
    const applied = await migrate(db);
    print(applied.length ? `Applied: ${applied.join(', ')}` : 'Database is up to date.');
  } finally {
    await db.close();
  }
}

async function bootstrap(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      org: { type: 'string', default: 'My organization' },
      project: { type: 'string', default: 'My project' },
    },
  });
  const config = loadConfig();
  const runtime = await openRuntime(config, { logger: createLogger({ logLevel: 'warn' }) });
  try {
    const { projects } = runtime.services;
    const organization = await projects.createOrganization(values.org, CLI_AUDIT);
    const project = await projects.createProject(organization.id, { name: values.project }, CLI_AUDIT);
    const key = await projects.createApiKey(project.id, 'bootstrap', [...SCOPES], CLI_AUDIT);
    if (runtime.generatedAdminKey) print(`admin key:       ${runtime.generatedAdminKey}  (shown once)`);
    print(`organization_id: ${organization.id}`);
    print(`project_id:      ${project.id}`);
    print(`bucket:          ${project.bucket}`);
    print(`api_key:         ${key.key}  (shown once; every scope)`);
  } finally {
    await runtime.close();
  }
}

export async function main(
  argv: string[],
  options: { beforeExit?: () => Promise<void> } = {},
): Promise<void> {
  if (options.beforeExit) beforeExit = options.beforeExit;
  const [command = 'serve', ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve();
    case 'worker':
      return work();
    case 'migrate':
      return runMigrate();
    case 'admin':
      if (rest[0] === 'bootstrap') return bootstrap(rest.slice(1));
      break;
    case 'upload':
    case 'ls':
    case 'download':
    case 'rm': {
      // Loaded only for these commands: the server's start does not pay for the SDK.
      const { runClientCommand } = await import('./cli/files.ts');
      process.exitCode = await runClientCommand(command, rest);
      return;
    }
    case 'backup':
    case 'restore': {
      const { runBackupCommand } = await import('./cli/backup.ts');
      process.exitCode = await runBackupCommand(command, rest);
      return;
    }
    case 'help':
    case '--help':
    case '-h':
      if (rest[0] === 'backup') print((await import('./cli/backup.ts')).BACKUP_USAGE);
      else if (rest[0] === 'client') print((await import('./cli/files.ts')).CLIENT_USAGE);
      else print(USAGE);
      return;
  }
  process.stderr.write(`Unknown command: ${argv.join(' ')}\n\n${USAGE}`);
  process.exit(64);
}
