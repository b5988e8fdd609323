import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { progressBars } from '../../src/cli/progress.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';

const root = join(import.meta.dirname, '../..');
const MiB = 1024 * 1024;
let coffer: TestCoffer;
let project: TestProject;
let dir: string;

beforeAll(async () => {
  coffer = await startCoffer();
  project = await coffer.newProject();
  dir = mkdtempSync(join(tmpdir(), 'coffer-cli-client-'));
});
afterAll(() => coffer.close());

/** Runs `coffer ARGS…` as a user would (stdout is a pipe, not a terminal). */
function cofferCli(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [join(root, 'src/main.ts'), ...args], {
      cwd: dir,
      env: {
        ...process.env,
        COFFER_URL: coffer.url,
        COFFER_API_KEY: project.key,
        COFFER_PROJECT: project.id,
        ...env,
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
const run = (args: string[], env?: Record<string, string>) => cofferCli(args, env);

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('coffer upload, ls, download, rm', () => {
  it('uploads files (a large one in parts) into a folder with tags and metadata, lists, downloads and removes them', async () => {
    const small = Buffer.from('hello from the command line\n');
    const large = randomBytes(20 * MiB);
    writeFileSync(join(dir, 'notes.txt'), small);
    writeFileSync(join(dir, 'video.bin'), large);

    const uploaded = await run([
      'upload',
      'notes.txt',
      'video.bin',
      '--folder',
      'docs/2026',
      '--tag',
      'cli',
      '--tag',
      'demo',
      '--metadata',
      '{"source":"cli"}',
      '--json',
    ]);
    expect(uploaded.stderr).toBe('');
    expect(uploaded.code).toBe(0);
    const files = uploaded.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(files.map((file) => file.filename)).toEqual(['notes.txt', 'video.bin']);
    for (const file of files) {
      expect(file).toMatchObject({ status: 'ready', tags: ['cli', 'demo'], metadata: { source: 'cli' } });
    }
    const folder = await project.call('GET', `/folders/${files[0].folder_id}`);
    expect(folder.body.path).toBe('docs/2026');
    expect(files[1].folder_id).toBe(files[0].folder_id);
    // The large one went in parts.
    const [session] = await coffer.services.db.query('SELECT id FROM multipart_sessions WHERE file_id = $1', [
      files[1].id,
    ]);
    expect(session).toBeDefined();

    const listed = await run(['ls', '--tag', 'cli', '--json']);
    expect(listed.code).toBe(0);
    expect(
      JSON.parse(listed.stdout)
        .items.map((file: { id: string }) => file.id)
        .sort(),
    ).toEqual(files.map((file) => file.id).sort());
    const tableOut = await run(['ls', '--q', 'notes']);
    expect(tableOut.code).toBe(0);
    const [header, row, ...rest] = tableOut.stdout.trim().split('\n');
    expect(header).toMatch(/^ID\s+NAME\s+STATUS\s+SIZE\s+CREATED$/);
    expect(row).toMatch(new RegExp(`^${files[0].id}\\s+notes\\.txt\\s+ready\\s+${small.length} B\\s+`));
    expect(rest).toEqual([]);

    const saved = await run(['download', files[1].id, '-o', 'copy.bin']);
    expect(saved.code).toBe(0);
    expect(sha256(readFileSync(join(dir, 'copy.bin')))).toBe(sha256(large));
    const byName = await run(['download', files[0].id]);
    expect(byName.code).toBe(0);
    expect(readFileSync(join(dir, 'notes.txt')).equals(small)).toBe(true);

    const removed = await run(['rm', files[0].id]);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toContain(`deleted ${files[0].id}`);
    expect((await project.call('GET', `/files/${files[0].id}`)).status).toBe(404);
  });

  it('prints one plain line per file when stdout is not a terminal', async () => {
    writeFileSync(join(dir, 'plain.txt'), 'plain');
    const result = await run(['upload', 'plain.txt']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^plain\.txt {2}5 B {2}file_[0-9A-Z]{26} ready\n$/);
  });

  it('exits 1 with the API error code, and 2 on usage errors', async () => {
    const missing = await run(['rm', 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^coffer rm: NOT_FOUND: /);
    const denied = await run(['ls'], { COFFER_API_KEY: 'coffer_live_wrong' });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/UNAUTHENTICATED/);
    for (const [args, env] of [
      [['upload'], {}],
      [['upload', 'nope.txt'], {}],
      [['upload', 'plain.txt', '--metadata', '[1]'], {}],
      [['ls', '--limit', 'many'], {}],
      [['ls', '--bogus'], {}],
      [['download'], {}],
      [['ls'], { COFFER_API_KEY: '' }],
      [['ls'], { COFFER_PROJECT: '' }],
    ] as const) {
      const result = await run([...args], env);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toContain('Client commands');
    }
  });
});

describe('progress bars', () => {
  it('draws a bar per file on a terminal', () => {
    const stream = Object.assign(new PassThrough(), {
      isTTY: true,
      columns: 100,
    }) as unknown as NodeJS.WriteStream;
    let drawn = '';
    (stream as unknown as PassThrough).on('data', (chunk) => (drawn += chunk));
    const bars = progressBars(true, stream);
    const bar = bars.add('big.bin', 4 * MiB);
    bar.update(2 * MiB);
    bar.done('file_X ready');
    bars.stop();
    expect(drawn).toContain('big.bin');
    expect(drawn).toContain('100%');
    expect(drawn).toContain('4.0 MiB/4.0 MiB');
    expect(drawn).toContain('file_X ready');
  });
});
