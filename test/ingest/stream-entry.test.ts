import { randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Caller } from '../../src/domain/principal.ts';
import type { FileRow } from '../../src/modules/files/repo.ts';
import type { UploadRequest } from '../../src/modules/ingest/intake.ts';
import type { Scope } from '../../src/modules/projects/schemas.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { sha256, upload } from '../support/files.ts';
import { drain } from '../support/pipeline.ts';

// The upload core's server-side way in, as the S3 and tus adapters use it: bytes a request carries
// become a file without any presigned URL, under every rule a REST upload passes.
let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const SCOPES: Scope[] = ['files:upload', 'files:read'];

async function callerOf(project: TestProject, token?: string): Promise<Caller> {
  const found = await coffer.services.projects.getProject(project.id);
  if (!token) {
    return {
      project: found!,
      principal: { kind: 'api_key', keyId: 'key_test', projectId: project.id, scopes: SCOPES },
    };
  }
  const principal = await coffer.services.tokens.resolve(token);
  if (!principal || principal === 'expired') throw new Error('token not resolved');
  return { project: found!, principal };
}

const request = (bytes: Buffer, extra: Partial<UploadRequest> = {}): UploadRequest => ({
  filename: 'notes.txt',
  content_type: 'text/plain',
  size_bytes: bytes.length,
  ...extra,
});

async function downloaded(project: TestProject, fileId: string): Promise<Buffer> {
  const reply = await project.call('GET', `/files/${fileId}/download`);
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  return Buffer.from(await (await fetch(reply.body.url)).arrayBuffer());
}

async function eventsOf(fileId: string): Promise<string[]> {
  const rows = await coffer.services.db.query<{ type: string }>(
    'SELECT type FROM events WHERE file_id = $1 ORDER BY created_at, id',
    [fileId],
  );
  return rows.map((row) => row.type);
}

const listed = async (project: TestProject) => (await project.call('GET', '/files')).body.total as number;

describe('the upload core from a stream', () => {
  it('stores a streamed file in one call: ready, its bytes and checksum, its events and usage', async () => {
    const project = await coffer.newProject();
    const bytes = randomBytes(3 * 1024 * 1024 + 11);
    const chunks = [bytes.subarray(0, 1000), bytes.subarray(1000)];
    const file = await coffer.services.ingest.writeFile(
      await callerOf(project),
      request(bytes, { tags: ['streamed'], metadata: { via: 'stream' } }),
      Readable.from(chunks),
    );
    expect(file).toMatchObject({ status: 'ready', size_bytes: bytes.length, tags: ['streamed'] });
    const shown = (await project.call('GET', `/files/${file.id}`)).body;
    expect(shown).toMatchObject({ status: 'ready', metadata: { via: 'stream' } });
    expect(sha256(await downloaded(project, file.id))).toBe(sha256(bytes));
    expect(await eventsOf(file.id)).toEqual(['file.uploaded', 'file.ready']);
    const usage = (await project.call('GET', '/usage')).body;
    expect(usage.storage.used_bytes).toBe(bytes.length);
    expect(usage.files.used).toBe(1);
  });

  it('hands a streamed file to the scan when the project scans', async () => {
    const project = await coffer.newProject({ virus_scan_enabled: true });
    const bytes = Buffer.from('scanned through the core');
    const file = await coffer.services.ingest.writeFile(
      await callerOf(project),
      request(bytes),
      Readable.from([bytes]),
    );
    expect(file.status).toBe('processing');
    await drain(coffer.services.pipeline);
    expect((await project.call('GET', `/files/${file.id}`)).body.status).toBe('ready');
  });

  it('refuses what the token or the project forbids before reading a byte', async () => {
    const project = await coffer.newProject({ max_file_size_bytes: 100 });
    const token = await project.call('POST', '/upload-tokens', {
      body: { allowed_mime_types: ['image/*'], max_size: 50 },
    });
    expect(token.status, JSON.stringify(token.body)).toBe(201);
    const cases: [Caller, UploadRequest, string][] = [
      [await callerOf(project, token.body.token), request(Buffer.alloc(10)), 'VALIDATION_ERROR'],
      [
        await callerOf(project, token.body.token),
        request(Buffer.alloc(60), { filename: 'a.png', content_type: 'image/png' }),
        'FILE_TOO_LARGE',
      ],
      [await callerOf(project), request(Buffer.alloc(101)), 'FILE_TOO_LARGE'],
    ];
    for (const [caller, declared, code] of cases) {
      const body = new PassThrough();
      await expect(coffer.services.ingest.writeFile(caller, declared, body)).rejects.toMatchObject({ code });
      expect(body.readableLength + body.writableLength).toBe(0);
      expect(body.readableFlowing).toBeNull(); // never read
    }
    expect(await listed(project)).toBe(0);
  });

  it('records nothing when the stream is shorter or longer than declared, or breaks', async () => {
    const project = await coffer.newProject();
    const caller = await callerOf(project);
    await expect(
      coffer.services.ingest.writeFile(caller, request(Buffer.alloc(100)), Readable.from([Buffer.alloc(99)])),
    ).rejects.toMatchObject({ code: 'InvalidArgument' });
    await expect(
      coffer.services.ingest.writeFile(
        caller,
        request(Buffer.alloc(100)),
        Readable.from([Buffer.alloc(101)]),
      ),
    ).rejects.toMatchObject({ code: 'InvalidArgument' });
    const broken = new PassThrough();
    const writing = coffer.services.ingest.writeFile(caller, request(Buffer.alloc(1024 * 1024)), broken);
    broken.write(Buffer.alloc(1000));
    setTimeout(() => broken.destroy(new Error('client went away')), 20);
    await expect(writing).rejects.toThrow();
    expect(await listed(project)).toBe(0);
    const usage = (await project.call('GET', '/usage')).body;
    expect(usage.storage.used_bytes + usage.storage.reserved_bytes).toBe(0);
  });

  it('keeps quotas and token counts exact, and leaves no object when the commit is refused', async () => {
    const project = await coffer.newProject();
    await coffer.call('PATCH', `/v1/projects/${project.id}`, {
      token: ADMIN_KEY,
      body: { settings: { max_files: 1 } },
    });
    const caller = await callerOf(project);
    const bytes = Buffer.from('one');
    await coffer.services.ingest.writeFile(caller, request(bytes), Readable.from([bytes]));
    const written = vi.spyOn(coffer.services.store, 'write');
    const refused = coffer.services.ingest.writeFile(caller, request(bytes), Readable.from([bytes]));
    await expect(refused).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' });
    const key = written.mock.calls[0]![0];
    written.mockRestore();
    // The bytes were stored before the transaction that refused them: they are gone again.
    expect(await coffer.services.store.head(key)).toBeUndefined();
    expect(await listed(project)).toBe(1);
  });

  it('makes a streamed write at the key of a ready file its new content, as a version', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const file = (await upload(project, { bytes: 'first' })).body;
    const caller = await callerOf(project);
    const [row] = await coffer.services.db.query<FileRow>('SELECT * FROM files WHERE id = $1', [file.id]);
    const bytes = Buffer.from('second, streamed');
    const written = await coffer.services.ingest.writeAtKey(
      caller,
      request(bytes, { filename: file.filename }),
      Readable.from([bytes]),
      { holder: async () => row },
    );
    if (written.kind !== 'content') throw new Error(`wrote ${written.kind}`);
    expect(written.outcome.status).toBe('committed');
    expect((await downloaded(project, file.id)).toString()).toBe('second, streamed');
    const versions = (await project.call('GET', `/files/${file.id}/versions`)).body;
    expect(versions.items.map((version: { id: string }) => version.id)[0]).toBe(written.outcome.version_id);
    expect(versions.total).toBe(2);
    expect(await listed(project)).toBe(1);
  });
});
