import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileResumeStore } from '@coffer/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bytesOf, type Harness, MIB, OBJECTS, partOf, startHarness } from './support/harness.ts';
import { requestsTo } from './support/http-proxy.ts';

let harness: Harness;
let dir: string;

beforeAll(async () => {
  harness = await startHarness();
  dir = mkdtempSync(join(tmpdir(), 'coffer-crash-'));
});
afterAll(async () => {
  await harness?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('resumes after the uploading process was killed, sending only the parts it had not stored', async () => {
  const project = await harness.coffer.newProject();
  const bytes = bytesOf(17 * MIB);
  const path = join(dir, 'backup.tar');
  writeFileSync(path, bytes);
  const resumeFile = join(dir, 'state', 'uploads.json');

  const child = spawn(process.execPath, [join(import.meta.dirname, 'fixtures', 'crash-upload.ts')], {
    env: {
      ...process.env,
      BASE_URL: harness.proxy.url,
      API_KEY: project.key,
      PROJECT_ID: project.id,
      FILE_PATH: path,
      COFFER_RESUME_FILE: resumeFile,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('exit', (_code, signal) => resolve(signal)),
  );
  // Parts 1 and 2 are stored; as part 3 arrives the process dies (and its request with it).
  harness.proxy.intercept = (request) => {
    if (request.method === 'PUT' && partOf(request.url) === 3) {
      child.kill('SIGKILL');
      return 'cut';
    }
    return undefined;
  };
  const start = harness.proxy.seen.length;
  expect(await exited).toBe('SIGKILL');
  harness.proxy.intercept = undefined;
  const crashed = { ...harness.proxy, seen: harness.proxy.seen.slice(start) };
  expect(requestsTo(crashed, 'PUT', OBJECTS).map((r) => partOf(r.url))).toEqual([1, 2, 3]);
  const saved = JSON.parse(readFileSync(resumeFile, 'utf8'));
  expect(Object.values(saved)).toEqual([
    expect.objectContaining({ partSize: 5 * MIB, uploadId: expect.any(String) }),
  ]);

  const resumed = harness.proxy.seen.length;
  const file = await harness.client(project).upload(project.id, path, {
    resume: true,
    resumeStore: fileResumeStore(resumeFile),
    concurrency: 1,
    multipartThreshold: 0,
  });
  const after = { ...harness.proxy, seen: harness.proxy.seen.slice(resumed) };
  expect(requestsTo(after, 'PUT', OBJECTS).map((r) => partOf(r.url))).toEqual([3, 4]);
  expect(requestsTo(after, 'POST', /\/multipart\/start$/)).toHaveLength(0);
  expect(file).toMatchObject({ filename: 'backup.tar', size_bytes: bytes.length, status: 'ready' });
  await harness.expectChecksum(project, file, bytes);
  expect(JSON.parse(readFileSync(resumeFile, 'utf8'))).toEqual({});
});
