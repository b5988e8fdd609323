import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/modules/projects/schemas.ts';
import { backend } from '../support/backends.ts';
import { ADMIN_KEY, type CallOptions, expectStatus, request } from '../support/coffer.ts';
import { sha256 } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import { type CofferProcess, exitOf, ready, startProcess, stopAll } from '../support/processes.ts';

// The servers keep their own embedded database in their data dir, the only database coffer backup
// copies: one pass (the embedded one) is enough.
const enabled = backend === 'embedded';

const root = join(import.meta.dirname, '../..');
const MiB = 1024 * 1024;
const temp = mkdtempSync(join(tmpdir(), 'coffer-backup-'));
const folder = (name: string) => join(temp, name);

afterAll(async () => {
  await stopAll();
  rmSync(temp, { recursive: true, force: true });
});

/** Runs `coffer ARGS` on the data dir `dataDir` without blocking this process (uploads go on meanwhile). */
function coffer(
  args: string[],
  dataDir: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['src/main.ts', ...args], {
    cwd: root,
    env: { ...process.env, COFFER_DATA_DIR: dataDir, COFFER_LOG_LEVEL: 'warn' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

async function serve(name: string, dataDir: string): Promise<CofferProcess> {
  const node = startProcess(name, 'serve', {
    COFFER_DATA_DIR: dataDir,
    COFFER_ADMIN_KEY: ADMIN_KEY,
    COFFER_LOG_LEVEL: 'warn',
    PORT: String(await freePort()),
  });
  await ready(node);
  return node;
}

describe.skipIf(!enabled)('coffer backup and coffer restore', () => {
  it('backs up a running server while uploads go on, and a restored data dir serves the same files', async () => {
    const source = folder('source');
    const node = await serve('serve', source);
    let apiKey = ADMIN_KEY;
    let projectId = '';
    const api = <T = any>(on: CofferProcess, method: string, path: string, options: CallOptions = {}) =>
      request<T>(`${on.url}/v1/projects/${projectId}${path}`, method, { token: apiKey, ...options });
    const org = await request(`${node.url}/v1/organizations`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'B' },
    });
    const project = await request(`${node.url}/v1/organizations/${org.body.id}/projects`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'Backed up', settings: { versioning_enabled: true } },
    });
    expectStatus(project, 201);
    projectId = project.body.id;
    const key = await api(node, 'POST', '/api-keys', {
      token: ADMIN_KEY,
      body: { name: 'b', scopes: SCOPES },
    });
    expectStatus(key, 201);
    apiKey = key.body.key;

    /** The bytes of every file (its current content) and of every version, by id. */
    const bytesOf = new Map<string, Buffer>();
    const upload = async (name: string, bytes: Buffer) => {
      const started = await api(node, 'POST', '/files/upload', {
        body: { filename: name, content_type: 'application/octet-stream', size_bytes: bytes.length },
      });
      expectStatus(started, 201);
      const put = await fetch(started.body.upload_url, {
        method: 'PUT',
        body: bytes,
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(put.status).toBe(200);
      expectStatus(await api(node, 'POST', `/files/${started.body.file_id}/confirm`), 200);
      bytesOf.set(started.body.file_id, bytes);
      return started.body.file_id as string;
    };
    for (let i = 0; i < 3; i++) await upload(`file-${i}.bin`, randomBytes(1000 * (i + 1)));

    // A multipart upload: a 5 MiB part and a last one.
    const parts = [randomBytes(5 * MiB), randomBytes(123_456)];
    const session = await api(node, 'POST', '/files/upload/multipart/start', {
      body: {
        filename: 'big.bin',
        content_type: 'application/octet-stream',
        total_size_bytes: 5 * MiB + 123_456,
      },
    });
    expectStatus(session, 201);
    const listed = [];
    for (const [index, part] of parts.entries()) {
      const url = await api(
        node,
        'GET',
        `/files/upload/multipart/${session.body.upload_id}/part-url?part=${index + 1}&size=${part.length}`,
      );
      const put = await fetch(url.body.url, { method: 'PUT', body: part });
      expect(put.status).toBe(200);
      listed.push({ part_number: index + 1, etag: put.headers.get('etag') });
    }
    const completed = await api(node, 'POST', `/files/upload/multipart/${session.body.upload_id}/complete`, {
      body: { parts: listed },
    });
    expectStatus(completed, 200);
    bytesOf.set(session.body.file_id, Buffer.concat(parts));

    // New content for the first file: its first content becomes version 1 of 2.
    const versioned = [...bytesOf.keys()][0]!;
    const firstContent = bytesOf.get(versioned)!;
    const newContent = randomBytes(4321);
    const version = await api(node, 'POST', `/files/${versioned}/versions`, {
      body: { size_bytes: newContent.length, content_type: 'application/octet-stream' },
    });
    expectStatus(version, 201);
    const put = await fetch(version.body.upload_url, {
      method: 'PUT',
      body: newContent,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(put.status).toBe(200);
    expectStatus(
      await api(node, 'POST', `/files/${versioned}/versions/${version.body.version_id}/confirm`),
      200,
    );
    bytesOf.set(versioned, newContent);
    const before = new Set(bytesOf.keys());
    const versionsBefore = (await api(node, 'GET', `/files/${versioned}/versions`)).body.items;
    expect(versionsBefore).toHaveLength(2);

    // Uploads go on while the running server writes the backup.
    let backingUp = true;
    const uploads = (async () => {
      for (let i = 0; backingUp; i++) await upload(`during-${i}.bin`, randomBytes(2000 + i));
    })();
    const backup = await coffer(['backup', folder('backup')], source);
    backingUp = false;
    await uploads;
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toMatch(/Backed up the database \(.+\) and \d+ objects/);
    const manifest = JSON.parse(readFileSync(join(folder('backup'), 'manifest.json'), 'utf8'));
    expect(manifest.files[0]).toEqual({
      path: 'database.tar.gz',
      size: expect.any(Number),
      sha256: expect.any(String),
    });
    for (const file of manifest.files) {
      expect(sha256(readFileSync(join(folder('backup'), file.path)))).toBe(file.sha256);
    }

    // Restore refuses the data dir of a running server, a data dir that is not empty, and a damaged backup.
    const busy = await coffer(['restore', folder('backup'), '--force'], source);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/in use by another Coffer process/);
    const damaged = folder('damaged');
    cpSync(folder('backup'), damaged, { recursive: true });
    const object = manifest.files.find((file: { path: string }) => file.path.startsWith('objects/'));
    const objectPath = join(damaged, object.path);
    const bytes = readFileSync(objectPath);
    bytes[0] = bytes[0]! ^ 0xff;
    writeFileSync(objectPath, bytes);
    const refused = await coffer(['restore', damaged], folder('refused'));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${object.path} does not match its checksum`);
    expect(existsSync(folder('refused'))).toBe(false);

    const restored = folder('restored');
    const restore = await coffer(['restore', folder('backup')], restored);
    expect(restore.code, restore.stderr).toBe(0);
    const again = await coffer(['restore', folder('backup')], restored);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already holds a database or objects: .* --force/);

    // The restored server lists what the backup saw, with the same bytes.
    const copy = await serve('serve (restored)', restored);
    const files = (await api(copy, 'GET', '/files?limit=100')).body.items as {
      id: string;
      status: string;
      checksum_sha256: string;
    }[];
    const ids = new Set(files.map((file) => file.id));
    for (const id of before) expect(ids.has(id), `${id} was stored before the backup`).toBe(true);
    for (const file of files) {
      expect(bytesOf.has(file.id), `${file.id} was uploaded`).toBe(true);
      // An upload confirmed after the snapshot is still uploading in it.
      if (!before.has(file.id) && file.status === 'uploading') continue;
      expect(file.status).toBe('ready');
      const link = await api(copy, 'GET', `/files/${file.id}/download`);
      expectStatus(link, 200);
      const downloaded = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
      expect(sha256(downloaded)).toBe(sha256(bytesOf.get(file.id)!));
      expect(file.checksum_sha256).toBe(sha256(downloaded));
    }
    const versionsAfter = (await api(copy, 'GET', `/files/${versioned}/versions`)).body.items;
    expect(versionsAfter).toEqual(versionsBefore);
    const first = versionsAfter.find((item: { version_number: number }) => item.version_number === 1);
    const link = await api(copy, 'GET', `/files/${versioned}/versions/${first.id}/download`);
    expectStatus(link, 200);
    expect(sha256(Buffer.from(await (await fetch(link.body.url)).arrayBuffer()))).toBe(sha256(firstContent));
  }, 240_000);

  it('backs up a data dir no server runs on by itself', async () => {
    const dataDir = folder('stopped');
    const node = await serve('serve (to stop)', dataDir);
    const org = await request(`${node.url}/v1/organizations`, 'POST', {
      token: ADMIN_KEY,
      body: { name: 'S' },
    });
    expectStatus(org, 201);
    node.child.kill('SIGTERM');
    expect(await exitOf(node)).toBe('0');
    const backup = await coffer(['backup', folder('offline')], dataDir);
    expect(backup.code, backup.stderr).toBe(0);
    expect(readdirSync(folder('offline')).sort()).toEqual(['database.tar.gz', 'manifest.json']);
    const restore = await coffer(['restore', folder('offline')], folder('offline-restored'));
    expect(restore.code, restore.stderr).toBe(0);
    const copy = await serve('serve (offline copy)', folder('offline-restored'));
    const orgs = await request(`${copy.url}/v1/organizations`, 'GET', { token: ADMIN_KEY });
    expect(orgs.body.items.map((item: { id: string }) => item.id)).toContain(org.body.id);
  }, 120_000);

  it('includes the server key only with --with-secret-key, and a restore puts it back', async () => {
    const dataDir = folder('keyed');
    const node = await serve('serve (keyed)', dataDir);
    const key = readFileSync(join(dataDir, 'secret.key'), 'utf8');
    const plain = await coffer(['backup', folder('keyed-plain')], dataDir);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toContain('The server key is not in the backup');
    expect(readdirSync(folder('keyed-plain'))).not.toContain('secret.key');
    // Made by the running server, with the key it runs with.
    const live = await coffer(['backup', folder('keyed-live'), '--with-secret-key'], dataDir);
    expect(live.code, live.stderr).toBe(0);
    expect(live.stdout).toContain('The backup holds the server key');
    expect(readFileSync(join(folder('keyed-live'), 'secret.key'), 'utf8')).toBe(key);
    node.child.kill('SIGTERM');
    expect(await exitOf(node)).toBe('0');
    // Made by the command itself, from the data dir's file.
    const offline = await coffer(['backup', folder('keyed-offline'), '--with-secret-key'], dataDir);
    expect(offline.code, offline.stderr).toBe(0);
    expect(readFileSync(join(folder('keyed-offline'), 'secret.key'), 'utf8')).toBe(key);

    const restore = await coffer(['restore', folder('keyed-live')], folder('keyed-restored'));
    expect(restore.code, restore.stderr).toBe(0);
    expect(restore.stdout).toContain('Restored the server key');
    expect(readFileSync(join(folder('keyed-restored'), 'secret.key'), 'utf8')).toBe(key);
    const misplaced = await coffer(['restore', folder('keyed-live'), '--with-secret-key'], folder('unused'));
    expect(misplaced.code).toBe(2);
  }, 120_000);
});
