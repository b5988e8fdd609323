import { existsSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  base,
  collect,
  dir,
  expectError,
  inSeconds,
  MULTIPART_TOTAL,
  newKey,
  serveLocalStore,
  store,
  storeError,
  tmpFiles,
  upload,
} from '../support/local-store.ts';

serveLocalStore();

/** A request with an exact, unnormalized path (fetch would resolve dot segments). */
function rawRequest(
  method: string,
  path: string,
  body?: Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { hostname, port, method, path, headers: { 'content-type': 'text/plain' } },
      (res) => {
        collect(res).then(
          (data) => resolve({ status: res.statusCode!, headers: res.headers, body: data }),
          reject,
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('keys', () => {
  const badKeys = [
    '../etc/passwd',
    'a/../b',
    'a/./b',
    'a//b',
    '/a',
    'a/',
    'a/b.txt',
    '',
    'a b',
    'a\\b',
    '..',
  ];

  it.each(badKeys)('presign and head refuse %j', async (key) => {
    const expiresAt = inSeconds(60);
    const refused = storeError('InvalidArgument');
    await expect(
      store.presignUpload(key, { size: 1, contentType: 'text/plain', expiresAt }),
    ).rejects.toMatchObject(refused);
    await expect(
      store.presignGet(key, { expiresAt, filename: 'x', contentType: 'text/plain' }),
    ).rejects.toMatchObject(refused);
    await expect(store.head(key)).rejects.toMatchObject(refused);
    await expect(store.read(key)).rejects.toMatchObject(refused);
    await expect(
      store.createMultipart(key, { contentType: 'text/plain', totalSize: MULTIPART_TOTAL }),
    ).rejects.toMatchObject(refused);
  });

  it('the routes refuse traversal paths with 400 BAD_REQUEST', async () => {
    const signed = new URL(
      await store.presignUpload(newKey(), { size: 3, contentType: 'text/plain', expiresAt: inSeconds(60) }),
    );
    for (const path of [
      'proj/../../escape',
      'proj/%2e%2e/%2e%2e/escape',
      '..%2f..%2fescape',
      'proj//escape',
      'a.b',
    ]) {
      const put = await rawRequest('PUT', `/objects/${path}${signed.search}`, Buffer.from('abc'));
      expect(put.status).toBe(400);
      expect(JSON.parse(put.body.toString()).error.code).toBe('BAD_REQUEST');
      const get = await rawRequest('GET', `/objects/${path}${signed.search}`);
      expect(get.status).toBe(400);
    }
    expect(existsSync(join(dir, '..', 'escape'))).toBe(false);
    expect(await tmpFiles()).toEqual([]);
  });

  it('delete removes the object and its sidecar, and ignores missing objects', async () => {
    const key = await upload(Buffer.from('bye'), 'text/plain');
    await store.delete(key);
    expect(await store.head(key)).toBeUndefined();
    expect(existsSync(join(dir, key))).toBe(false);
    expect(existsSync(join(dir, key.split('/')[0]!, key.split('/')[1]!))).toBe(false);
    await store.delete(key);
    const url = await store.presignGet(key, {
      expiresAt: inSeconds(60),
      filename: 'a',
      contentType: 'text/plain',
    });
    await expectError(await fetch(url), 404, 'NOT_FOUND');
  });
});
