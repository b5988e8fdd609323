import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { httpAnswer } from '../../src/http/error-handler.ts';
import { createLocalStore } from '../../src/infra/storage/local/store.ts';
import { StoreError } from '../../src/infra/storage/object-store.ts';
import { base, newKey, SECRET, serveLocalStore, store, storeError, upload } from '../support/local-store.ts';

serveLocalStore();

describe('the rest of the ObjectStore interface', () => {
  it('declares what it can do, and seals an uploaded object as it stands', async () => {
    expect(store.capabilities).toEqual({ servesUrls: true, sha256OnUpload: true, partSizeRequired: false });
    const key = await upload(Buffer.from('sealed'), 'text/plain');
    expect(await store.seal(key)).toEqual(await store.head(key));
    expect(await store.seal(key)).toEqual(await store.head(key));
    expect(await store.seal(newKey())).toBeUndefined();
  });

  it('is ready once its folder exists, and Unavailable when it cannot write there', async () => {
    const root = await mkdtemp(join(tmpdir(), 'coffer-local-check-'));
    try {
      const fresh = createLocalStore({ dir: join(root, 'a', 'b'), publicUrl: base, secret: SECRET });
      await fresh.check();
      expect(existsSync(join(root, 'a', 'b'))).toBe(true);
      await fresh.close();
      await writeFile(join(root, 'file'), 'not a folder');
      const blocked = createLocalStore({ dir: join(root, 'file'), publicUrl: base, secret: SECRET });
      await expect(blocked.check()).rejects.toMatchObject(storeError('Unavailable'));
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("is answered at the HTTP edge with the contract's errors, hiding why the store is unavailable", () => {
    const tooLarge = httpAnswer(new StoreError('TooLarge', 'Too many bytes', { max_bytes: 10 }));
    expect(tooLarge).toMatchObject({
      status: 413,
      code: 'REQUEST_TOO_LARGE',
      message: 'Too many bytes',
      details: { max_bytes: 10 },
    });
    expect(httpAnswer(new StoreError('NoSuchUpload', 'Upload not found'))).toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
    });
    expect(httpAnswer(new StoreError('InvalidPart', 'Part 2 was not uploaded'))).toMatchObject({
      status: 422,
      code: 'VALIDATION_ERROR',
    });
    const cause = new Error('connect ECONNREFUSED 10.0.0.7:9000');
    const unavailable = httpAnswer(
      new StoreError('Unavailable', 'read: 10.0.0.7 failed', { host: 'x' }, { cause }),
    );
    expect(unavailable).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE', details: undefined });
    expect(unavailable.message).not.toMatch(/10\.0\.0\.7/);
  });
});
