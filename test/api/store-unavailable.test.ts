import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { freePort } from '../support/net.ts';

/**
 * An S3 store that does not answer (it accepts connections and says nothing) or is not there at all
 * (connections refused): requests fail with 503 STORE_UNAVAILABLE in bounded time, and nothing is
 * recorded half-way.
 */

let silent: Server;
const sockets = new Set<Socket>();
beforeAll(async () => {
  silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

async function withStoreAt(endpoint: string) {
  return startCoffer({
    COFFER_STORAGE: 's3',
    COFFER_S3_BUCKET: 'coffer-unreachable',
    COFFER_S3_ENDPOINT: endpoint,
    COFFER_S3_ACCESS_KEY_ID: 'AKIAUNREACHABLE',
    COFFER_S3_SECRET_ACCESS_KEY: 'unreachable-secret',
    COFFER_S3_FORCE_PATH_STYLE: 'true',
    COFFER_S3_TIMEOUT_MS: '200',
  });
}

describe.each([
  ['does not answer', async () => `http://127.0.0.1:${(silent.address() as { port: number }).port}`],
  ['refuses connections', async () => `http://127.0.0.1:${await freePort()}`],
])('a store that %s', (_what, endpoint) => {
  let coffer: TestCoffer;
  let project: TestProject;
  beforeAll(async () => {
    coffer = await withStoreAt(await endpoint());
    project = await coffer.newProject();
  });
  afterAll(() => coffer.close());

  const filesOf = async () =>
    coffer.services.db.query('SELECT id FROM files WHERE project_id = $1', [project.id]);

  it('fails an upload with 503 STORE_UNAVAILABLE in bounded time, leaving no file behind', async () => {
    for (const [path, body] of [
      ['/files/upload', { filename: 'a.txt', content_type: 'text/plain', size_bytes: 5 }],
      [
        '/files/upload/multipart/start',
        { filename: 'a.bin', content_type: 'application/octet-stream', total_size_bytes: 5 },
      ],
    ] as const) {
      const started = Date.now();
      const reply = await project.call('POST', path, { body });
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(reply.status).toBe(503);
      expect(reply.body.error.code).toBe('STORE_UNAVAILABLE');
      // The cause (addresses, SDK errors) stays in the log.
      expect(reply.body.error.message).not.toMatch(/127\.0\.0\.1|ECONN|Timeout/i);
    }
    expect(await filesOf()).toEqual([]);
    expect(
      await coffer.services.db.query('SELECT id FROM multipart_sessions WHERE project_id = $1', [project.id]),
    ).toEqual([]);
  });

  it('reports the store unavailable on /health/ready', async () => {
    const started = Date.now();
    const ready = await coffer.call('GET', '/health/ready');
    expect(Date.now() - started).toBeLessThan(2500);
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({
      status: 'degraded',
      checks: { database: 'ok', store: 'unavailable' },
    });
  });
});
