/** The benchmarks' HTTP client: a keep-alive pool, JSON API calls and the projects they work in. */
import { rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import type { CofferServer } from './coffer-server.ts';
import { ADMIN_KEY } from './lib.ts';
import { pool } from './measure.ts';
/** The client's connection pool: keep-alive, no timeouts (a 1 GiB body may take a while). */
export const agent = new Agent({
  connections: 64,
  keepAliveTimeout: 60_000,
  headersTimeout: 0,
  bodyTimeout: 0,
});

export interface Reply<T = any> {
  status: number;
  body: T;
}

/** A JSON API call; the answer's body is parsed when it is JSON. */
export async function call<T = any>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  options: { token?: string; body?: unknown } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await request(url, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    dispatcher: agent,
  });
  const text = await response.body.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: response.statusCode, body: body as T };
}

/** Fails with the whole answer when its status is not the expected one. */
export function expectStatus(reply: Reply, status: number, what: string): void {
  if (reply.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${reply.status} ${JSON.stringify(reply.body)}`);
  }
}

export interface Project {
  id: string;
  key: string;
  /** Calls `/v1/projects/{id}{path}` with the project's API key. */
  api<T = any>(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<Reply<T>>;
}

/** A new organization and project (with `settings`) and an API key with every scope, made with the admin key. */
export async function createProject(
  server: CofferServer,
  settings: Record<string, unknown> = {},
): Promise<Project> {
  const admin = { token: ADMIN_KEY };
  const org = await call('POST', `${server.url}/v1/organizations`, { ...admin, body: { name: 'Bench org' } });
  expectStatus(org, 201, 'create organization');
  const project = await call('POST', `${server.url}/v1/organizations/${org.body.id}/projects`, {
    ...admin,
    body: { name: 'Bench project', settings },
  });
  expectStatus(project, 201, 'create project');
  const key = await call('POST', `${server.url}/v1/projects/${project.body.id}/api-keys`, {
    ...admin,
    body: {
      name: 'bench',
      scopes: ['files:upload', 'files:read', 'files:download', 'files:delete', 'projects:read'],
    },
  });
  expectStatus(key, 201, 'create API key');
  const id = project.body.id as string;
  const token = key.body.key as string;
  return {
    id,
    key: token,
    api: (method, path, body) => call(method, `${server.url}/v1/projects/${id}${path}`, { token, body }),
  };
}

/**
 * Deletes every file of `project` (page by page through the API), then removes their stored objects
 * from the local store under the server's data directory at once: a DELETE is soft, and the server's
 * collector would keep the bytes for the grace period (COFFER_GC_GRACE_SECONDS, a day by default).
 * Answers the number of files removed. Only for the local store (`objects/` of `server.dataDir`).
 */
export async function purgeFiles(server: CofferServer, project: Project, concurrency = 16): Promise<number> {
  let removed = 0;
  for (;;) {
    const page = await project.api<{ items: { id: string; storage_key: string }[] }>(
      'GET',
      '/files?limit=200',
    );
    expectStatus(page, 200, 'list files');
    const files = page.body.items;
    if (files.length === 0) return removed;
    await pool(files.length, concurrency, async (i) => {
      const file = files[i]!;
      expectStatus(await project.api('DELETE', `/files/${file.id}`), 200, `delete ${file.id}`);
      const segments = file.storage_key.split('/');
      const path = join(server.dataDir, 'objects', ...segments);
      await Promise.all(
        [path, `${path}.meta.json`, `${path}.parts`].map((target) =>
          rm(target, { recursive: true, force: true }),
        ),
      );
      // The folders the key leaves empty, as the store's own delete does (a folder still in use stays).
      for (let depth = segments.length - 1; depth > 0; depth--) {
        try {
          await rmdir(join(server.dataDir, 'objects', ...segments.slice(0, depth)));
        } catch {
          break;
        }
      }
    });
    removed += files.length;
  }
}
