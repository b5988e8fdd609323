import { randomBytes } from 'node:crypto';
import { type ClientRequest, request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';
import { auth, MiB, offsetStream, tusEndpointOf, tusHeaders, upload } from '../../support/tus-endpoint.ts';

// tus 1.0.0: "The Server SHOULD always attempt to store as much of the received data as possible."
// A PATCH whose connection drops keeps the bytes that reached the server, of its unfinished part too.
let a: TestCoffer;
let project: TestProject;
beforeAll(async () => {
  a = await startCoffer();
  project = await a.newProject();
});
afterAll(() => a?.close());
const { expectStored, patchUpload, created } = tusEndpointOf(() => ({ a, project }));

const offsetOf = async (url: string) =>
  Number((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).headers.get('upload-offset'));

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

/** Writes `bytes` a socket read's worth at a time, each once the one before was taken. */
async function feed(sent: ClientRequest, bytes: Buffer) {
  for (let at = 0; at < bytes.length; at += 64 * 1024) {
    if (!sent.write(bytes.subarray(at, at + 64 * 1024))) {
      await new Promise((resolve) => sent.once('drain', resolve));
    }
  }
  await new Promise<void>((resolve) => sent.write(Buffer.alloc(0), () => resolve()));
}

/**
 * Drops the connection of `sent`, then answers the offset HEAD gives once it moved past `before`
 * and settled: the bytes that reached the server, which it keeps.
 */
async function cutAndSettle(url: string, sent: ClientRequest, before: number): Promise<number> {
  sent.destroy();
  await expect.poll(() => offsetOf(url), { timeout: 20_000, interval: 100 }).toBeGreaterThan(before);
  let offset = await offsetOf(url);
  for (let same = 0; same < 5; ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = await offsetOf(url);
    same = now === offset ? same + 1 : 0;
    offset = now;
  }
  return offset;
}

describe('tus 1.0 PATCH whose connection drops', () => {
  it('keeps the bytes of a first part cut short, then resumes there with tus-js-client', async () => {
    const data = randomBytes(20 * MiB);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    const cut = openPatch(url, 0, data.length);
    await feed(cut, data.subarray(0, 7 * MiB));
    const offset = await cutAndSettle(url, cut, 0);
    expect(offset).toBeLessThanOrEqual(7 * MiB);
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
    const cut = openPatch(url, 0, data.length);
    await feed(cut, data.subarray(0, 3 * MiB));
    const offset = await cutAndSettle(url, cut, 0);
    expect(offset).toBeLessThanOrEqual(3 * MiB);

    const rest = await patchUpload(url, offset, data.subarray(offset));
    expect(rest.status, JSON.stringify(rest.body)).toBe(204);
    expect(rest.headers.get('upload-offset')).toBe(String(data.length));
    await expectStored(fileId, data);
  });

  it('keeps the bytes of the part after a whole one', async () => {
    const data = randomBytes(40 * MiB);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    const cut = openPatch(url, 0, data.length);
    await feed(cut, data.subarray(0, 22 * MiB));
    // The first part of 16 MiB is stored while the next one's bytes arrive.
    await expect.poll(() => offsetOf(url), { timeout: 20_000, interval: 100 }).toBe(16 * MiB);
    const offset = await cutAndSettle(url, cut, 16 * MiB);
    expect(offset).toBeLessThanOrEqual(22 * MiB);

    const rest = await patchUpload(url, offset, data.subarray(offset));
    expect(rest.status, JSON.stringify(rest.body)).toBe(204);
    await expectStored(fileId, data);
  });

  it('keeps the bytes of a PATCH that makes one part of its own, after the first', async () => {
    const data = randomBytes(18 * MiB);
    const { path, fileId } = await created(data.length);
    const url = `${a.url}${path}`;
    expect((await patchUpload(url, 0, data.subarray(0, 6 * MiB))).status).toBe(204);
    // 12 MiB at 6 MiB: the rest of the upload in one part, received before the lock is taken.
    const cut = openPatch(url, 6 * MiB, 12 * MiB);
    await feed(cut, data.subarray(6 * MiB, 13 * MiB));
    const offset = await cutAndSettle(url, cut, 6 * MiB);
    expect(offset).toBeLessThanOrEqual(13 * MiB);

    const rest = await patchUpload(url, offset, data.subarray(offset));
    expect(rest.status, JSON.stringify(rest.body)).toBe(204);
    await expectStored(fileId, data);
  });
});
