import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { findUploadWithSession } from '../../../src/protocols/tus/upload-repo.ts';
import { request } from '../../support/coffer.ts';
import { sha256 } from '../../support/files.ts';
import { feed, MiB, openChunkedPatch, tusEndpointSuite, tusHeaders } from '../../support/tus-endpoint.ts';

const { a: coffer, project, created, offsetOf } = tusEndpointSuite();
const openChunked = (url: string, offset: number) => openChunkedPatch(url, project.key, offset);

/** The file once committed: its size, and its bytes as downloaded. */
async function expectStored(fileId: string, data: Buffer) {
  const file = await project.call('GET', `/files/${fileId}`);
  expect(file.body.size_bytes).toBe(data.length);
  const link = await project.call('GET', `/files/${fileId}/download`);
  const bytes = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
  expect(sha256(bytes)).toBe(sha256(data));
}

/**
 * Memory outside the JavaScript heap (where Buffers live) that is live on this thread, after a full
 * collection that also finishes freeing what it found dead, so that garbage does not count. The
 * store's writer thread keeps its own, which does not count either.
 */
function liveBuffers(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (options: object) => void;
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return getHeapStatistics().external_memory;
}

describe('tus chunked bodies', () => {
  it('stores a chunked PATCH longer than a part through a temporary file, not in memory', async () => {
    const data = randomBytes(40 * MiB);
    const { url, fileId } = await created(data.length);
    const before = liveBuffers();
    let peak = before;
    const patch = openChunked(url, 0);
    await patch.continued;
    await feed(patch.sent, data, () => {
      peak = Math.max(peak, liveBuffers());
    });
    patch.sent.end();
    expect(await patch.answered).toEqual({ status: 204, offset: String(data.length) });
    // A part gathered in memory would hold up to 16 MiB; streamed, a few buffers are on their way.
    expect(peak - before).toBeLessThan(4 * MiB);
    await expectStored(fileId, data);
  });

  it('cuts a chunked body into parts as large as the upload’s length needs, as one with its length', async () => {
    // 10,000 parts of 16 MiB hold less than 200 GiB: its parts are larger.
    const length = 200 * 1024 * MiB;
    const { url } = await created(length);
    const patch = openChunked(url, 0);
    await patch.continued;
    await feed(patch.sent, randomBytes(40 * MiB));
    patch.sent.end();
    expect(await patch.answered).toEqual({ status: 204, offset: String(40 * MiB) });
    const id = new URL(url).pathname.split('/').pop()!;
    const upload = (await findUploadWithSession(coffer.services.db, project.id, id))?.upload;
    const part = Math.ceil(length / 9000);
    expect(upload?.parts.map((stored) => stored.size)).toEqual([part, 40 * MiB - part]);
    expect((await request(url, 'DELETE', { headers: tusHeaders(project.key) })).status).toBe(204);
  });

  it('holds the upload while the store takes a part of a chunked body slowly, a HEAD meanwhile', async () => {
    const data = randomBytes(20 * MiB);
    const { url, fileId } = await created(data.length);
    const { store } = coffer.services;
    const { writePart } = store;
    // The first part is read over about 5 seconds: longer than a PATCH receiving nothing holds its upload.
    store.writePart = (key, uploadId, partNumber, body, size, options) => {
      const slow = async function* () {
        for await (const chunk of body) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          yield chunk;
        }
      };
      const bytes = partNumber === 1 ? Readable.from(slow()) : body;
      return writePart.call(store, key, uploadId, partNumber, bytes, size, options);
    };
    try {
      const patch = openChunked(url, 0);
      let answered = false;
      const answer = patch.answered.finally(() => {
        answered = true;
      });
      await patch.continued;
      await feed(patch.sent, data);
      patch.sent.end();
      while (!answered) {
        expect([0, 16 * MiB, data.length]).toContain(await offsetOf(url));
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      expect(await answer).toEqual({ status: 204, offset: String(data.length) });
    } finally {
      store.writePart = writePart;
    }
    await expectStored(fileId, data);
  });

  it('resumes a chunked body cut mid-way at the offset of the bytes that reached the server', async () => {
    const data = randomBytes(40 * MiB);
    const { url, fileId } = await created(data.length);
    const cut = openChunked(url, 0);
    cut.answered.catch(() => undefined);
    await cut.continued;
    await feed(cut.sent, data.subarray(0, 36 * MiB));
    // Two parts of 16 MiB stored, the next one's bytes still arriving when the client goes: those
    // that reached the server are kept too.
    await expect.poll(() => offsetOf(url), { timeout: 20_000, interval: 100 }).toBe(32 * MiB);
    cut.sent.destroy();
    await expect.poll(() => offsetOf(url), { timeout: 20_000, interval: 100 }).toBeGreaterThan(32 * MiB);
    const offset = await offsetOf(url);
    expect(offset).toBeLessThanOrEqual(36 * MiB);

    const rest = openChunked(url, offset);
    await rest.continued;
    await feed(rest.sent, data.subarray(offset));
    rest.sent.end();
    expect(await rest.answered).toEqual({ status: 204, offset: String(data.length) });
    await expectStored(fileId, data);
  });
});
