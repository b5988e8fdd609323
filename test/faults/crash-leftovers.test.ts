import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { type ClientRequest, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/modules/projects/schemas.ts';
import { backend } from '../support/backends.ts';
import { ADMIN_KEY, expectStatus, request } from '../support/coffer.ts';
import { freePort } from '../support/net.ts';
import {
  type CofferProcess,
  kill,
  ready,
  sleep,
  startProcess,
  stopAll,
  until,
} from '../support/processes.ts';
import { filesUnder } from './invariants.ts';

// The child processes keep their own embedded database and local store in a data dir: nothing here
// depends on the test backend, so one pass (the embedded one) is enough.
const enabled = backend === 'embedded';

const KiB = 1024;
const TTL_SECONDS = 5;
const GRACE_SECONDS = 1;
const MULTIPART_EXPIRY_SECONDS = 8;
/** What each slow upload sends before the server is killed; each declares more. */
const SENT = 256 * KiB;
const DECLARED = 1024 * KiB;

const dataDir = mkdtempSync(join(tmpdir(), 'coffer-crash-'));
const objects = join(dataDir, 'objects');
const env = {
  COFFER_DATA_DIR: dataDir,
  COFFER_ADMIN_KEY: ADMIN_KEY,
  COFFER_UPLOAD_URL_TTL_SECONDS: String(TTL_SECONDS),
  COFFER_GC_GRACE_SECONDS: String(GRACE_SECONDS),
  COFFER_MULTIPART_EXPIRY_SECONDS: String(MULTIPART_EXPIRY_SECONDS),
  COFFER_LOG_LEVEL: 'info',
};

async function serve(name: string): Promise<CofferProcess> {
  const node = startProcess(name, 'serve', { ...env, PORT: String(await freePort()) });
  await ready(node);
  return node;
}

/** A PUT that declares DECLARED bytes, sends SENT of them and waits: the server is mid-write. */
function slowPut(url: string, contentType: string): ClientRequest {
  const put = httpRequest(url, {
    method: 'PUT',
    headers: { 'content-type': contentType, 'content-length': String(DECLARED) },
  });
  put.on('error', () => {}); // the server dies under it
  put.write(randomBytes(SENT));
  return put;
}

/** Every file under the store's folder, with its size (files removed while it looks are left out). */
async function storedFiles(): Promise<{ path: string; size: number }[]> {
  const sized = await Promise.all(
    (await filesUnder(objects)).map(async (path) => {
      const info = await stat(path).catch(() => undefined);
      return info && { path, size: info.size };
    }),
  );
  return sized.filter((file) => file !== undefined);
}

afterAll(async () => {
  await stopAll();
  rmSync(dataDir, { recursive: true, force: true });
});

describe.skipIf(!enabled)('coffer serve killed with SIGKILL mid-PUT and mid-part', () => {
  it('leaves no temp or part bytes on disk after the restarted server collects, and both uploads fail', async () => {
    const first = await serve('serve');
    const call = <T = any>(path: string, options: { token?: string; body?: unknown; method?: string } = {}) =>
      request<T>(`${first.url}${path}`, options.method ?? 'POST', {
        token: options.token,
        body: options.body,
      });
    const org = await call('/v1/organizations', { token: ADMIN_KEY, body: { name: 'Crash' } });
    expectStatus(org, 201);
    const project = await call(`/v1/organizations/${org.body.id}/projects`, {
      token: ADMIN_KEY,
      body: { name: 'Crash' },
    });
    expectStatus(project, 201);
    const projectId: string = project.body.id;
    const key = await call(`/v1/projects/${projectId}/api-keys`, {
      token: ADMIN_KEY,
      body: { name: 'crash', scopes: SCOPES },
    });
    expectStatus(key, 201);
    const api = (path: string, body?: unknown, method?: string) =>
      call(`/v1/projects/${projectId}${path}`, { token: key.body.key, body, method });

    // A single upload, and a multipart upload with one part stored.
    const single = await api('/files/upload', {
      filename: 'single.bin',
      content_type: 'application/octet-stream',
      size_bytes: DECLARED,
    });
    expectStatus(single, 201);
    const session = await api('/files/upload/multipart/start', {
      filename: 'parts.bin',
      content_type: 'application/octet-stream',
      total_size_bytes: 2 * DECLARED,
    });
    expectStatus(session, 201);
    const partUrl = async (part: number, size: number) => {
      const reply = await api(
        `/files/upload/multipart/${session.body.upload_id}/part-url?part=${part}&size=${size}`,
        undefined,
        'GET',
      );
      expectStatus(reply, 200);
      return reply.body.url as string;
    };
    const stored = await fetch(await partUrl(1, DECLARED), { method: 'PUT', body: randomBytes(DECLARED) });
    expect(stored.status).toBe(200);

    // Both bodies half sent; the kill lands once both are being written to disk.
    const puts = [
      slowPut(single.body.upload_url, 'application/octet-stream'),
      slowPut(await partUrl(2, DECLARED), 'application/octet-stream'),
    ];
    await until('both uploads to be half written', async () => {
      const writing = (await storedFiles()).filter(
        (file) => file.path.startsWith(join(objects, '.tmp')) && file.size >= SENT,
      );
      return writing.length >= 2;
    });
    await kill(first);
    const killedAt = Date.now();
    for (const put of puts) put.destroy();
    const left = await storedFiles();
    expect(left.filter((file) => file.path.startsWith(join(objects, '.tmp'))).length).toBeGreaterThanOrEqual(
      2,
    );
    expect(left.some((file) => file.path.startsWith(join(objects, '.multipart')))).toBe(true);

    // Past every deadline: the upload URL's plus the grace (the single upload is abandoned), the
    // session's (it expires), and the temp files' (last written at the kill).
    const deadline = Math.max(
      Date.parse(single.body.expires_at) + GRACE_SECONDS * 1000,
      Date.parse(session.body.expires_at),
      killedAt + (TTL_SECONDS + GRACE_SECONDS) * 1000,
    );
    await sleep(deadline - Date.now() + 1000);

    // The restarted server collects at start.
    const second = await serve('serve (restarted)');
    const file = async (id: string) =>
      (await request(`${second.url}/v1/projects/${projectId}/files/${id}`, 'GET', { token: key.body.key }))
        .body;
    const outcome = await until('collection to leave nothing behind', async () => {
      const files = await storedFiles();
      const singleFile = await file(single.body.file_id);
      const partsFile = await file(session.body.file_id);
      const done = files.length === 0 && singleFile.status === 'failed' && partsFile.status === 'failed';
      return done && { files, singleFile, partsFile };
    });
    expect(outcome.files).toEqual([]);
    expect(outcome.singleFile).toMatchObject({ status: 'failed', failure_reason: 'upload_abandoned' });
    // Expired by the reaper, or abandoned by the collector first (its upload deadline is the session's).
    expect(['upload_expired', 'upload_abandoned']).toContain(outcome.partsFile.failure_reason);
    expect(
      second.logs.some((line) => line.msg === 'collected stored objects' && Number(line.stale) >= 2),
    ).toBe(true);
  }, 120_000);
});
