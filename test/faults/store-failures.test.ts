import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpAnswer } from '../../src/http/error-handler.ts';
import { storeFailure } from '../../src/infra/storage/local/files.ts';
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
  Object.assign(new Error(`${code}: failed, write '/data/objects/.tmp/x'`), { code, syscall: 'write' });

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
    // A body whose connection dropped (Node's `aborted`) is the client's failure, not the store's.
    const cut = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    expect(storeFailure(cut)).toBe(cut);
    expect(httpAnswer(cut)).toMatchObject({
      status: 400,
      code: 'BAD_REQUEST',
      message: 'The upload was interrupted',
    });
    // Not a system error: left as it is.
    const other = new Error('something else');
    expect(storeFailure(other)).toBe(other);
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
