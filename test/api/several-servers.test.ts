import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { openRuntime, type Runtime } from '../../src/runtime.ts';
import { backend, secondDb, testSecretKeyEnv } from '../support/backends.ts';
import { ADMIN_KEY, startCoffer } from '../support/coffer.ts';

/** A server as `coffer serve` builds it from its environment alone: no COFFER_REDIS_URL, so no shared cache. */
async function server() {
  const config = loadConfig({
    COFFER_DATA_DIR: mkdtempSync(join(tmpdir(), 'coffer-test-')),
    COFFER_ADMIN_KEY: ADMIN_KEY,
    COFFER_LOG_LEVEL: 'silent',
    ...testSecretKeyEnv(),
  });
  const runtime = await openRuntime(config, { db: await secondDb(), logger: pino({ level: 'silent' }) });
  const app = await buildApp({ config, services: runtime.services });
  opened.push({ app, runtime });
  return {
    async call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, token: string, body?: object) {
      const reply = await app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, body });
      return { status: reply.statusCode, body: reply.body ? reply.json() : undefined };
    },
  };
}

const opened: { app: FastifyInstance; runtime: Runtime }[] = [];
afterAll(async () => {
  for (const { app, runtime } of opened.splice(0)) {
    await app.close();
    await runtime.close();
  }
});

describe.runIf(backend === 'postgres')('several servers on one PostgreSQL without Redis', () => {
  it('stops a revoked key and applies a new IP allowlist on every server at once', async () => {
    const [a, b] = [await server(), await server()];
    const org = await a.call('POST', '/v1/organizations', ADMIN_KEY, { name: 'Acme' });
    const project = await a.call('POST', `/v1/organizations/${org.body.id}/projects`, ADMIN_KEY, {
      name: 'Site',
    });
    const path = `/v1/projects/${project.body.id}`;
    const newKey = async () =>
      (await a.call('POST', `${path}/api-keys`, ADMIN_KEY, { name: 'k', scopes: ['projects:read'] })).body;
    const revoked = await newKey();
    const fenced = await newKey();
    // Both servers have looked the keys and the project up before the changes.
    for (const node of [a, b]) {
      expect((await node.call('GET', path, revoked.key)).status).toBe(200);
      expect((await node.call('GET', path, fenced.key)).status).toBe(200);
    }

    expect((await a.call('DELETE', `${path}/api-keys/${revoked.id}`, ADMIN_KEY)).status).toBe(204);
    const afterRevoke = await b.call('GET', path, revoked.key);
    expect(afterRevoke.status).toBe(401);
    expect(afterRevoke.body.error.code).toBe('UNAUTHENTICATED');

    const patched = await a.call('PATCH', path, ADMIN_KEY, { settings: { ip_allowlist: ['10.0.0.0/8'] } });
    expect(patched.status).toBe(200);
    const outside = await b.call('GET', path, fenced.key);
    expect(outside.status).toBe(403);
    expect(outside.body.error.code).toBe('PERMISSION_DENIED');
  });
});

describe.runIf(backend === 'embedded')('the embedded database (one process)', () => {
  it('keeps key and project lookups in the process cache', async () => {
    const coffer = await startCoffer();
    try {
      const project = await coffer.newProject();
      expect((await project.call('GET', '')).status).toBe(200);
      expect(await coffer.services.cache.get(`project:${project.id}`)).toBeDefined();
    } finally {
      await coffer.close();
    }
  });
});
