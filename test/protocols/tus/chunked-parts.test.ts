import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { request } from '../../support/coffer.ts';
import { b64, chunked, MiB, offsetStream, tusEndpointSuite, tusHeaders } from '../../support/tus-endpoint.ts';

// Chunked bodies, without Content-Length, as tus-java-client and tus-android-client send them: stored
// part by part at the size their end gives, the parts before a refusal or a failure kept.
const { a, project, expectStored, created } = tusEndpointSuite();

describe('tus 1.0 endpoint', () => {
  describe('tus uploads written from several nodes', () => {
    const patchChunked = (url: string, offset: number, bytes: Buffer, extra: Record<string, string> = {}) =>
      chunked(
        url,
        'PATCH',
        tusHeaders(project.key, { ...offsetStream, 'upload-offset': String(offset), ...extra }),
        bytes,
      );

    it('stores chunked PATCHes, and a POST standing in for one, at the size their end gives', async () => {
      const data = randomBytes(1024 + 20 * MiB + 3 * MiB + 5);
      const { path, fileId } = await created(data.length);
      const url = `${a.url}${path}`;
      // A few bytes that wait for a part, a long body cut into a part and bytes that wait again…
      const small = await patchChunked(url, 0, data.subarray(0, 1024));
      expect(small.status).toBe(204);
      expect(small.headers['upload-offset']).toBe('1024');
      const long = await patchChunked(url, 1024, data.subarray(1024, 1024 + 20 * MiB));
      expect(long.status).toBe(204);
      expect(long.headers['upload-offset']).toBe(String(1024 + 20 * MiB));
      // …and the last bytes as POST with X-HTTP-Method-Override, as tus-java-client may send them.
      const last = await chunked(
        url,
        'POST',
        tusHeaders(project.key, {
          ...offsetStream,
          'x-http-method-override': 'PATCH',
          'upload-offset': String(1024 + 20 * MiB),
        }),
        data.subarray(1024 + 20 * MiB),
      );
      expect(last.status).toBe(204);
      expect(last.headers['upload-offset']).toBe(String(data.length));
      await expectStored(fileId, data);
    });

    it('takes a chunked body with the creation of a deferred upload, and the length with the last one', async () => {
      const data = randomBytes(6 * MiB + 3);
      const creation = await chunked(
        `${a.url}/tus`,
        'POST',
        tusHeaders(project.key, {
          ...offsetStream,
          'upload-defer-length': '1',
          'upload-metadata': `filename ${b64('chunked.bin')}`,
        }),
        data.subarray(0, 5 * MiB),
      );
      expect(creation.status).toBe(201);
      expect(creation.headers['upload-offset']).toBe(String(5 * MiB));
      const url = creation.headers.location!;
      const last = await patchChunked(url, 5 * MiB, data.subarray(5 * MiB), {
        'upload-length': String(data.length),
      });
      expect(last.status).toBe(204);
      expect(last.headers['upload-offset']).toBe(String(data.length));
      await expectStored(creation.headers['x-coffer-file-id'] as string, data);
    });

    it('refuses with 413 a chunked body past the upload’s length, keeping only the pieces before it', async () => {
      const tiny = await created(10);
      const refused = await patchChunked(`${a.url}${tiny.path}`, 0, Buffer.alloc(11, 1));
      expect(refused.status).toBe(413);
      const head = await request(`${a.url}${tiny.path}`, 'HEAD', { headers: tusHeaders(project.key) });
      expect(head.headers.get('upload-offset')).toBe('0');

      const data = randomBytes(20 * MiB);
      const { path, fileId } = await created(data.length);
      const url = `${a.url}${path}`;
      const over = await patchChunked(url, 0, Buffer.concat([data, Buffer.from('!')]));
      expect(over.status).toBe(413);
      // The first 16 MiB were a part before the body went past the length; nothing of what followed.
      const kept = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
      expect(kept.headers.get('upload-offset')).toBe(String(16 * MiB));
      expect((await patchChunked(url, 16 * MiB, data.subarray(16 * MiB))).status).toBe(204);
      await expectStored(fileId, data);
    });

    it('refuses with 413 a chunked creation body past Upload-Length, terminating the upload made for it', async () => {
      const fresh = await a.newProject();
      for (const size of [10, 20 * MiB]) {
        const creation = await chunked(
          `${a.url}/tus`,
          'POST',
          tusHeaders(fresh.key, {
            ...offsetStream,
            'upload-length': String(size),
            'upload-metadata': `filename ${b64('long.bin')}`,
          }),
          randomBytes(size + 1),
        );
        expect(creation.status, String(size)).toBe(413);
        expect(creation.headers.location).toBeUndefined();
      }
      const files = await a.services.db.query<{ status: string }>(
        'SELECT status FROM files WHERE project_id = $1',
        [fresh.id],
      );
      expect(files.map((file) => file.status)).toEqual(['failed', 'failed']);
      expect((await fresh.call('GET', '/usage')).body.storage.reserved_bytes).toBe(0);
    });

    it('answers the offset of the first bytes a creation kept, when the rest could not be stored', async () => {
      const data = randomBytes(20 * MiB);
      const { store } = a.services;
      const { writePart } = store;
      // The second part, the last 4 MiB, fails once.
      let failed = false;
      store.writePart = async (...args) => {
        if (args[2] === 2 && !failed) {
          failed = true;
          throw new Error('store unavailable');
        }
        return writePart.apply(store, args);
      };
      let creation: Awaited<ReturnType<typeof chunked>>;
      try {
        creation = await chunked(
          `${a.url}/tus`,
          'POST',
          tusHeaders(project.key, {
            ...offsetStream,
            'upload-length': String(data.length),
            'upload-metadata': `filename ${b64('kept.bin')}`,
          }),
          data,
        );
      } finally {
        store.writePart = writePart;
      }
      expect(failed).toBe(true);
      expect(creation.status).toBe(201);
      expect(creation.headers['upload-offset']).toBe(String(16 * MiB));
      const url = creation.headers.location!;
      const head = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
      expect(head.headers.get('upload-offset')).toBe(String(16 * MiB));
      expect((await patchChunked(url, 16 * MiB, data.subarray(16 * MiB))).status).toBe(204);
      await expectStored(creation.headers['x-coffer-file-id'] as string, data);
    });
  });
});
