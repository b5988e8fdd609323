import { randomBytes } from 'node:crypto';
import { type ClientRequest, request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyTimes } from '../../../src/http/idle-bodies.ts';
import { request } from '../../support/coffer.ts';
import {
  b64,
  feed,
  MiB,
  offsetStream,
  openChunkedPatch,
  tusEndpointSuite,
  tusHeaders,
} from '../../support/tus-endpoint.ts';

// A request whose link died without closing (no FIN or RST) receives nothing more: the next HEAD of its
// upload has it store what it received, of its part in flight too, and answers the offset with those
// bytes (tus 1.0.0: "The Server SHOULD always attempt to store as much of the received data as possible").
const { a, project, expectStored, patchUpload, created, offsetOf } = tusEndpointSuite();

/** The request's answer: its status, or the error its connection ended with. */
const outcomeOf = (sent: ClientRequest) =>
  new Promise<number | string>((resolve) => {
    sent.on('response', (response) => {
      response.resume();
      resolve(response.statusCode!);
    });
    sent.on('error', (error) => resolve(error.message));
  });

/** A chunked PATCH at `offset` once the server answered 100 Continue, and its outcome (as outcomeOf's). */
async function openChunked(url: string, offset: number) {
  const { sent, continued, answered } = openChunkedPatch(url, project.key, offset);
  const outcome = answered.then(
    ({ status }) => status,
    (error: Error) => error.message,
  );
  await continued;
  return { sent, outcome };
}

describe('tus 1.0 request whose link dies without closing', () => {
  it('has a stalled chunked PATCH store what reached the server once a HEAD asks, then resumes there', async () => {
    const data = randomBytes(24 * MiB);
    const { url, fileId } = await created(data.length);
    // A whole part of 16 MiB and 3 MiB of the next one, then nothing, the connection left open.
    const sent = 19 * MiB + 7;
    const stalled = await openChunked(url, 0);
    await feed(stalled.sent, data.subarray(0, sent));
    await expect
      .poll(() => offsetOf(url), { timeout: 20_000, interval: 200 })
      .toBeGreaterThanOrEqual(16 * MiB);
    // Once it is stalled, a HEAD asks it to let go and answers when it stored the bytes of the next part.
    await expect.poll(() => offsetOf(url), { timeout: 15_000, interval: 500 }).toBe(sent);
    // Ended as a dropped connection is: it never answers 204.
    expect(await stalled.outcome).not.toBe(204);

    const rest = await openChunked(url, sent);
    await feed(rest.sent, data.subarray(sent));
    rest.sent.end();
    expect(await rest.outcome).toBe(204);
    expect(await offsetOf(url)).toBe(data.length);
    await expectStored(fileId, data);
  });

  it('has a stalled creation-with-upload store what reached the server once a HEAD asks, then resumes there', async () => {
    const { data, sent, url, outcome } = await stalledCreation();
    await expect.poll(() => offsetOf(url), { timeout: 15_000, interval: 500 }).toBe(sent);
    expect(await outcome).not.toBe(201);
    await resumed(url, data, sent);
  });

  describe('once nobody asks', () => {
    const { idleMs } = bodyTimes;
    beforeAll(() => {
      bodyTimes.idleMs = 2000;
    });
    afterAll(() => {
      bodyTimes.idleMs = idleMs;
    });

    it('has a stalled creation-with-upload store what reached the server and let go, its link taken for dead', async () => {
      const { data, sent, url, outcome, id } = await stalledCreation();
      // No HEAD: its client has no URL to send one to.
      const row = () =>
        a.services.db
          .query<{ upload_offset: number; lock_id: string | null }>(
            'SELECT upload_offset, lock_id FROM tus_uploads WHERE id = $1',
            [id],
          )
          .then(([found]) => found);
      await expect
        .poll(row, { timeout: 15_000, interval: 200 })
        .toEqual({ upload_offset: sent, lock_id: null });
      expect(await outcome).not.toBe(201);
      await resumed(url, data, sent);
    });

    it('closes a stalled creation that carries the whole file, keeping nothing: its client starts over', async () => {
      // tus-js-client's creation of a small file: no part, the file written at once, or not at all.
      const data = randomBytes(2 * MiB);
      const { stalled, metadata, outcome } = openCreation('whole', data.length, data.length);
      await feed(stalled, data.subarray(0, MiB));
      // Closed unanswered, as a dropped connection (tus clients retry one).
      expect(await outcome).not.toBeTypeOf('number');
      const recorded = await a.services.db.query('SELECT id FROM tus_uploads WHERE metadata = $1', [
        metadata,
      ]);
      expect(recorded).toEqual([]);
      const again = await request(`${a.url}/tus`, 'POST', {
        headers: {
          ...tusHeaders(project.key, { ...offsetStream, 'upload-metadata': metadata }),
          'upload-length': String(data.length),
        },
        body: data,
      });
      expect(again.status, JSON.stringify(again.body)).toBe(201);
      await expectStored(again.headers.get('x-coffer-file-id')!, data);
    });

    it('answers a last PATCH whose completion takes longer than the bound: its client sent all it had', async () => {
      // A deferred length declared by the last PATCH.
      const data = randomBytes(7 * MiB);
      const first = 6 * MiB;
      const created = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, {
          'upload-defer-length': '1',
          'upload-metadata': `filename ${b64('deferred.bin')}`,
        }),
      });
      expect(created.status).toBe(201);
      const url = created.headers.get('location')!;
      const fileId = created.headers.get('x-coffer-file-id')!;
      expect((await patchUpload(url, 0, data.subarray(0, first))).status).toBe(204);
      // A store that assembles the file slowly (a large one).
      const { store } = a.services;
      const { completeMultipart } = store;
      store.completeMultipart = async (...args: Parameters<typeof completeMultipart>) => {
        await new Promise((resolve) => setTimeout(resolve, bodyTimes.idleMs + 2000));
        return completeMultipart.apply(store, args);
      };
      try {
        const last = await request(url, 'PATCH', {
          headers: tusHeaders(project.key, {
            ...offsetStream,
            'upload-offset': String(first),
            'upload-length': String(data.length),
          }),
          body: data.subarray(first),
        });
        expect(last.status, JSON.stringify(last.body)).toBe(204);
        expect(last.headers.get('upload-offset')).toBe(String(data.length));
      } finally {
        store.completeMultipart = completeMultipart;
      }
      await expectStored(fileId, data);
    });
  });
});

/** A creation of an upload of `length` bytes announcing `carried` of them, its body written by the caller. */
function openCreation(name: string, length: number, carried: number) {
  const metadata = `filename ${b64(`${name}-${randomBytes(6).toString('hex')}.bin`)}`;
  const stalled = httpRequest(`${a.url}/tus`, {
    method: 'POST',
    headers: {
      ...tusHeaders(project.key, { ...offsetStream, 'upload-metadata': metadata }),
      'upload-length': String(length),
      'content-length': String(carried),
    },
  });
  return { stalled, metadata, outcome: outcomeOf(stalled) };
}

/**
 * A creation of 12 MiB whose first 6 MiB come with it, of which 3 MiB (and 7 bytes) arrive, the
 * connection then left open: the bytes sent, the upload (its client never got its Location: found
 * as the server lists it) and the request's outcome.
 */
async function stalledCreation() {
  const data = randomBytes(12 * MiB);
  const { stalled, metadata, outcome } = openCreation('stalled', data.length, 6 * MiB);
  const sent = 3 * MiB + 7;
  await feed(stalled, data.subarray(0, sent));
  const idOf = async () =>
    (
      await a.services.db.query<{ id: string }>(
        'SELECT id FROM tus_uploads WHERE project_id = $1 AND metadata = $2',
        [project.id, metadata],
      )
    )[0]?.id;
  await expect.poll(idOf, { timeout: 10_000, interval: 100 }).toBeDefined();
  const id = (await idOf())!;
  return { data, sent, id, url: `${a.url}/tus/${id}`, outcome };
}

/** Sends the rest of `data` from `sent` to `url`, and checks the file holds all of it. */
async function resumed(url: string, data: Buffer, sent: number) {
  const rest = await patchUpload(url, sent, data.subarray(sent));
  expect(rest.status, JSON.stringify(rest.body)).toBe(204);
  const fileId = (await request(url, 'HEAD', { headers: tusHeaders(project.key) })).headers.get(
    'x-coffer-file-id',
  )!;
  await expectStored(fileId, data);
}
