import { randomBytes } from 'node:crypto';
import { mkdir, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conflict } from '../../src/domain/errors.ts';
import { cutByClient, httpAnswer } from '../../src/http/error-handler.ts';
import { storeFailure } from '../../src/infra/storage/local/files.ts';
import { writers } from '../../src/infra/storage/writer-pool.ts';
import { storage } from '../support/backends.ts';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';
import { initiate, put } from '../support/files.ts';
import { onDisk } from './invariants.ts';

/**
 * The local store's folder failing under a PUT (the full disk itself is in outages.test.ts, where a
 * tmpfs can be mounted): the answer names the failure in the contract's error body, never a 500,
 * and nothing of the body is kept.
 */
const errno = (code: string) =>
  Object.assign(new Error(`${code}: failed, write '/data/objects/.tmp/x'`), { code });

describe('system errors of the local store', () => {
  it('answer 507 STORAGE_FULL for a full disk or a spent quota, 503 STORE_UNAVAILABLE for any other', () => {
    for (const code of ['ENOSPC', 'EDQUOT']) {
      expect(httpAnswer(storeFailure(errno(code)))).toMatchObject({ status: 507, code: 'STORAGE_FULL' });
    }
    for (const code of ['EIO', 'EACCES', 'EROFS', 'EMFILE']) {
      const error = httpAnswer(storeFailure(errno(code)));
      expect(error).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE' });
      expect(error.message).not.toContain('/data'); // the path stays in the log
    }
    // A body whose connection dropped (Node's `aborted`) is the client's failure, not the store's;
    // the same error of an outbound connection (the S3 backend's) is the server's.
    const cut = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    expect(storeFailure(cut)).toBe(cut);
    const request = { raw: { errored: cut } } as unknown as FastifyRequest;
    expect(httpAnswer(cutByClient(request, cut))).toMatchObject({
      status: 400,
      code: 'BAD_REQUEST',
      message: 'The upload was interrupted',
    });
    const outbound = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    expect(httpAnswer(cutByClient(request, outbound))).toMatchObject({ status: 500, code: 'INTERNAL' });
    // A refusal Coffer ended the body with stays what it says.
    const refused = conflict('Busy');
    expect(cutByClient({ raw: { errored: refused } } as unknown as FastifyRequest, refused)).toBe(refused);
    // Not a system error: left as it is.
    const other = new Error('something else');
    expect(storeFailure(other)).toBe(other);
  });

  it("are the store's when its writer thread meets them (every body past 64 KiB)", async () => {
    // A descriptor the thread cannot write: its system error comes back across the thread's boundary.
    const path = join(tmpdir(), `coffer-read-only-${process.pid}`);
    await writeFile(path, '');
    const file = await open(path, 'r');
    try {
      const sink = writers.open(file.fd, null);
      const failed = await sink
        .write(Buffer.alloc(2 * 1024 * 1024))
        .then(() => sink.finish())
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      await sink.abort();
      expect(httpAnswer(storeFailure(failed))).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE' });
    } finally {
      await file.close();
      await rm(path, { force: true });
    }
  });
});

describe.skipIf(storage !== 'local')('a PUT into a store folder that cannot be written', () => {
  let coffer: TestCoffer;
  beforeAll(async () => {
    coffer = await startCoffer();
  });
  afterAll(() => coffer?.close());

  it('answers 503 STORE_UNAVAILABLE, keeps nothing, and works again once the folder is repaired', async () => {
    const project = await coffer.newProject();
    const objects = join(coffer.config.dataDir, 'objects');
    const bytes = randomBytes(64 * 1024);
    const started = await initiate(project, { bytes, content_type: 'application/octet-stream' });
    // The folder of temp files is a file: nothing can be written into it.
    await mkdir(objects, { recursive: true });
    await rm(join(objects, '.tmp'), { recursive: true, force: true });
    await writeFile(join(objects, '.tmp'), 'not a folder');
    const refused = await put(started.upload_url, bytes, 'application/octet-stream');
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.text).error).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      request_id: expect.any(String),
    });
    expect((await onDisk(objects)).keys.size).toBe(0);

    await rm(join(objects, '.tmp'));
    expect((await put(started.upload_url, bytes, 'application/octet-stream')).status).toBe(200);
    const confirmed = await project.call('POST', `/files/${started.file_id}/confirm`);
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.status).toBe('ready');
  });
});
