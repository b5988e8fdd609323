import { randomBytes } from 'node:crypto';
import { type ClientRequest, request as httpRequest } from 'node:http';
import { Transform } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  auth,
  feed,
  MiB,
  offsetStream,
  tusEndpointSuite,
  tusHeaders,
  upload,
} from '../../support/tus-endpoint.ts';

// tus 1.0.0: "The Server SHOULD always attempt to store as much of the received data as possible."
// A PATCH whose connection drops keeps the bytes that reached the server, of its unfinished part too.
const { a, project, expectStored, patchUpload, created, offsetOf } = tusEndpointSuite();

/** A PATCH announcing `size` bytes at `offset`, its body written by the caller. */
function openPatch(url: string, offset: number, size: number): ClientRequest {
  const sent = httpRequest(url, {
    method: 'PATCH',
    headers: {
      ...tusHeaders(project.key, { ...offsetStream, 'upload-offset': String(offset) }),
      'content-length': String(size),
    },
  });
  sent.on('error', () => undefined);
  return sent;
}

/**
 * A PATCH of the rest of `data` from `from`, its connection dropped once the bytes up to `to` are
 * sent (and `meanwhile` ran): answers the offset HEAD gives once it moved past `from` and settled,
 * the bytes that reached the server, which it keeps.
 */
async function cutPatch(
  url: string,
  data: Buffer,
  from: number,
  to: number,
  meanwhile?: () => Promise<number>,
) {
  const sent = openPatch(url, from, data.length - from);
  await feed(sent, data.subarray(from, to));
  const before = (await meanwhile?.()) ?? from;
  sent.destroy();
  await expect.poll(() => offsetOf(url), { timeout: 20_000, interval: 100 }).toBeGreaterThan(before);
  let offset = await offsetOf(url);
  for (let same = 0; same < 5; ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = await offsetOf(url);
    same = now === offset ? same + 1 : 0;
    offset = now;
  }
  expect(offset).toBeLessThanOrEqual(to);
  return offset;
}

/** A stream passing each chunk on `ms` after it came. */
const slowly = (ms: number) =>
  new Transform({
    transform(chunk, _encoding, done) {
      setTimeout(() => done(null, chunk), ms);
    },
  });

/** The rest of `data` from `offset` in one PATCH, then the file as stored. */
async function resume(url: string, offset: number, data: Buffer, fileId: string) {
  const rest = await patchUpload(url, offset, data.subarray(offset));
  expect(rest.status, JSON.stringify(rest.body)).toBe(204);
  expect(rest.headers.get('upload-offset')).toBe(String(data.length));
  await expectStored(fileId, data);
}

describe('tus 1.0 PATCH whose connection drops', () => {
  it('keeps the bytes of a first part cut short, then resumes there with tus-js-client', async () => {
    const data = randomBytes(20 * MiB);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    const offset = await cutPatch(url, data, 0, 7 * MiB);
    expect(await offsetOf(url)).toBe(offset);

    // tus-js-client asks HEAD for the offset, and sends the rest from there.
    await upload(data, {
      uploadUrl: url,
      headers: auth(project.key),
      metadata: { filename: 'x.bin' },
      onProgress: () => undefined,
    });
    await expectStored(fileId, data);
  });

  it('keeps bytes too few for a part as bytes waiting for the next one', async () => {
    const data = randomBytes(12 * MiB + 7);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    await resume(url, await cutPatch(url, data, 0, 3 * MiB), data, fileId);
  });

  it('keeps the bytes of a cut PATCH that the store takes in slower than a stalled PATCH is taken over', async () => {
    const data = randomBytes(12 * MiB + 7);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    const { store } = a.services;
    const write = store.write;
    // About 5 s for the 3 MiB kept, past the 3 s after which a PATCH that receives nothing is stalled.
    store.write = (key, body, options) => write.call(store, key, body.pipe(slowly(100)), options);
    try {
      await resume(url, await cutPatch(url, data, 0, 3 * MiB), data, fileId);
    } finally {
      store.write = write;
    }
  });

  it('answers a HEAD sent while a cut PATCH stores its bytes with the offset that counts them', async () => {
    const data = randomBytes(12 * MiB + 7);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    const { store } = a.services;
    const write = store.write;
    // The 3 MiB kept of the cut PATCH wait 4 s for the store: longer than a stalled holder asked to
    // let go is given, which a PATCH letting go of its own accord is never taken for.
    const stored = Promise.withResolvers<void>();
    store.write = async (key, body, options) => {
      stored.resolve();
      await new Promise((resolve) => setTimeout(resolve, 4000));
      return write.call(store, key, body, options);
    };
    try {
      const sent = openPatch(url, 0, data.length);
      await feed(sent, data.subarray(0, 3 * MiB));
      sent.destroy();
      // Its client resuming while they are stored: the HEAD waits for them.
      await stored.promise;
      expect(await offsetOf(url)).toBe(3 * MiB);
    } finally {
      store.write = write;
    }
    await resume(url, 3 * MiB, data, fileId);
  });

  it('keeps the bytes of the part after a whole one', async () => {
    const data = randomBytes(40 * MiB);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    // The first part of 16 MiB is stored while the next one's bytes arrive.
    const offset = await cutPatch(url, data, 0, 22 * MiB, async () => {
      await expect.poll(() => offsetOf(url), { timeout: 20_000, interval: 100 }).toBe(16 * MiB);
      return 16 * MiB;
    });
    await resume(url, offset, data, fileId);
  });

  it('keeps the bytes of a PATCH that makes one part of its own, after the first', async () => {
    const data = randomBytes(18 * MiB);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    expect((await patchUpload(url, 0, data.subarray(0, 6 * MiB))).status).toBe(204);
    // 12 MiB at 6 MiB: the rest of the upload in one part, received before the lock is taken.
    await resume(url, await cutPatch(url, data, 6 * MiB, 13 * MiB), data, fileId);
  });
});
