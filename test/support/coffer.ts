import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, expect } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import { serveMetrics } from '../../src/infra/metrics.ts';
import { SCOPES, type Scope, type SettingsInput } from '../../src/modules/projects/schemas.ts';
import { openRuntime } from '../../src/runtime.ts';
import type { Services } from '../../src/services.ts';
import { startWorkers } from '../../src/workers.ts';
import { testCache, testClamdUrl, testDb, testSecretKeyEnv, testStorageEnv } from './backends.ts';
import { freePort } from './net.ts';

export const ADMIN_KEY = `coffer_admin_${'t'.repeat(43)}`;

export interface Reply<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface TestCoffer {
  url: string;
  config: Config;
  services: Services;
  app: FastifyInstance;
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<Reply<T>>;
  /** A new organization and project (with settings), and an API key holding `scopes` (all by default). */
  newProject(settings?: SettingsInput, scopes?: readonly Scope[]): Promise<TestProject>;
  close(): Promise<void>;
}

export interface TestProject {
  id: string;
  organizationId: string;
  key: string;
  /** Calls `/v1/projects/{id}{path}` with the project's key unless another token is given. */
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<Reply<T>>;
}

export async function request<T = any>(
  url: string,
  method: string,
  options: CallOptions = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | Buffer | undefined;
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    // Bytes as they are; anything else but text as JSON.
    body =
      typeof options.body === 'string' || Buffer.isBuffer(options.body)
        ? options.body
        : JSON.stringify(options.body);
  }
  const response = await fetch(url, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body: parsed as T, headers: response.headers };
}

export function expectStatus(reply: Reply, status: number): void {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
}

/** A new API key of `project` holding only `scopes`. */
export async function keyWith(
  coffer: TestCoffer,
  project: TestProject,
  scopes: readonly Scope[],
): Promise<{ id: string; key: string }> {
  const reply = await coffer.call('POST', `/v1/projects/${project.id}/api-keys`, {
    token: ADMIN_KEY,
    body: { name: 'scoped', scopes },
  });
  expectStatus(reply, 201);
  return reply.body;
}

/** A real Coffer server on a free port, over this worker's database, with a fresh data directory. */
export async function startCoffer(
  env: Record<string, string> = {},
  options: {
    workers?: boolean;
    /** Extra CA certificates (PEM) trusted for webhook receivers (a test's self-signed receiver). */
    webhookCa?: string;
  } = {},
): Promise<TestCoffer> {
  const port = await freePort();
  const config = loadConfig({
    PORT: String(port),
    COFFER_DATA_DIR: mkdtempSync(join(tmpdir(), 'coffer-test-')),
    COFFER_ADMIN_KEY: ADMIN_KEY,
    COFFER_LOG_LEVEL: 'silent',
    ...testSecretKeyEnv(),
    ...(testClamdUrl() ? { COFFER_CLAMD_URL: testClamdUrl()! } : {}),
    ...testStorageEnv(),
    ...env,
  });
  const cache = await testCache();
  const runtime = await openRuntime(config, {
    db: await testDb(),
    cache,
    logger: pino({ level: 'silent' }),
    webhookCa: options.webhookCa,
  });
  const app = await buildApp({ config, services: runtime.services });
  await app.listen({ port, host: config.host });
  // As coffer serve does: GET /metrics on its own listener when COFFER_METRICS_PORT is set.
  const metrics = await serveMetrics(config.metrics, runtime.services.metrics);
  const workers = options.workers
    ? startWorkers(runtime.services.workers(), pino({ level: 'silent' }))
    : undefined;
  const url = `http://127.0.0.1:${port}`;
  const call = <T = any>(method: string, path: string, options?: CallOptions) =>
    request<T>(`${url}${path}`, method, options);

  return {
    url,
    config,
    services: runtime.services,
    app,
    call,
    async newProject(settings, scopes = SCOPES) {
      const org = await call('POST', '/v1/organizations', { token: ADMIN_KEY, body: { name: 'Test org' } });
      const project = await call('POST', `/v1/organizations/${org.body.id}/projects`, {
        token: ADMIN_KEY,
        body: { name: 'Test project', settings },
      });
      if (project.status !== 201) throw new Error(`project creation failed: ${JSON.stringify(project.body)}`);
      const key = await call('POST', `/v1/projects/${project.body.id}/api-keys`, {
        token: ADMIN_KEY,
        body: { name: 'test', scopes },
      });
      const id = project.body.id as string;
      return {
        id,
        organizationId: org.body.id,
        key: key.body.key,
        call: (method, path, options = {}) =>
          call(method, `/v1/projects/${id}${path}`, { ...options, token: options.token ?? key.body.key }),
      };
    },
    async close() {
      // As coffer serve does on SIGTERM: connections still open after a grace period are cut.
      const force = setTimeout(() => app.server.closeAllConnections(), 2000);
      await app.close();
      clearTimeout(force);
      await workers?.stop();
      await metrics?.close();
      await runtime.close();
      await cache.close();
    },
  };
}

/**
 * What `current` answers when a property is read, named before it exists: a server or bucket that a
 * `beforeAll` makes, given to the tests of a file before that hook has run.
 */
function readThrough<T extends object>(current: () => T | undefined): T {
  const made = () => {
    const value = current();
    if (value === undefined) throw new Error('read before the beforeAll that makes it ran');
    return value;
  };
  return new Proxy({} as T, {
    get: (_, key) => Reflect.get(made(), key),
    set: (_, key, value) => Reflect.set(made(), key, value),
    has: (_, key) => Reflect.has(made(), key),
    ownKeys: () => Reflect.ownKeys(made()),
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(made(), key);
      return descriptor && { ...descriptor, configurable: true };
    },
  });
}

/**
 * What `make` makes in the `beforeAll` of the file or `describe` this is called in; `undo`, if given,
 * runs on it in the `afterAll`.
 */
export function madeBeforeAll<T extends object>(make: () => Promise<T>, undo?: (made: T) => unknown): T {
  let made: T | undefined;
  beforeAll(async () => {
    made = await make();
  });
  if (undo)
    afterAll(async () => {
      if (made) await undo(made);
    });
  return readThrough(() => made);
}

/**
 * A Coffer for the tests of the file or `describe` this is called in: started in its `beforeAll`,
 * closed in its `afterAll`.
 */
export const cofferForSuite = (...args: Parameters<typeof startCoffer>): TestCoffer =>
  madeBeforeAll(
    () => startCoffer(...args),
    (coffer) => coffer.close(),
  );
