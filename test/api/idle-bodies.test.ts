import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { HeadObjectCommand, PutObjectCommand, S3ServiceException } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyTimes } from '../../src/http/idle-bodies.ts';
import { storage } from '../support/backends.ts';
import { request } from '../support/coffer.ts';
import { Exchange } from '../support/exchange.ts';
import { s3EndpointSuite } from '../support/s3-endpoint.ts';

// A body whose link died without closing (no FIN or RST) receives nothing more: once it received no
// byte for a while, the server answers it in its dialect and closes the connection, keeping nothing.
const { coffer, bucketWith } = s3EndpointSuite();
const MiB = 1024 * 1024;
const { idleMs } = bodyTimes;
beforeAll(() => {
  bodyTimes.idleMs = 1500;
});
afterAll(() => {
  bodyTimes.idleMs = idleMs;
});

describe.skipIf(storage !== 'local')('a presigned PUT whose body stops arriving', () => {
  it('is answered 408 in the error body, stores nothing, and the URL then takes the whole body', async () => {
    const { project } = await bucketWith();
    const data = randomBytes(2 * MiB);
    const started = await project.call('POST', '/files/upload', {
      body: { filename: 'stalled.bin', content_type: 'application/octet-stream', size_bytes: data.length },
    });
    expect(started.status).toBe(201);
    const url = new URL(started.body.upload_url);
    const exchange = new Exchange(coffer.url, 'PUT', `${url.pathname}${url.search}`, {
      'content-type': 'application/octet-stream',
      'content-length': String(data.length),
    });
    await exchange.write(data.subarray(0, MiB));
    const answer = await exchange.next();
    expect(answer.status).toBe(408);
    expect(answer.headers.connection).toBe('close');
    const { error } = JSON.parse(answer.body);
    expect(error).toEqual({
      code: 'BAD_REQUEST',
      message: 'No byte of the request body arrived for 1.5 s',
      request_id: answer.headers['x-request-id'],
    });
    await exchange.closed;
    // Nothing of it was kept: confirming finds no object, and the URL takes the whole body.
    const early = await project.call('POST', `/files/${started.body.file_id}/confirm`);
    expect(early.status).toBe(409);
    const put = await request(started.body.upload_url, 'PUT', {
      headers: { 'content-type': 'application/octet-stream' },
      body: data,
    });
    expect(put.status).toBe(200);
    const confirmed = await project.call('POST', `/files/${started.body.file_id}/confirm`);
    expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(200);
    expect(confirmed.body.size_bytes).toBe(data.length);
  });
});

describe('an S3 PutObject whose body stops arriving', () => {
  it('is answered RequestTimeout, as S3 answers it, and no object is made', async () => {
    const { client, name } = await bucketWith();
    const body = new PassThrough();
    body.write(randomBytes(MiB));
    const sent = client.send(
      new PutObjectCommand({ Bucket: name, Key: 'stalled.bin', Body: body, ContentLength: 2 * MiB }),
    );
    const error = await sent.then(
      () => undefined,
      (failed: unknown) => failed,
    );
    expect(error).toBeInstanceOf(S3ServiceException);
    expect((error as S3ServiceException).name).toBe('RequestTimeout');
    expect((error as S3ServiceException).$metadata.httpStatusCode).toBe(400);
    body.destroy();
    await expect(
      client.send(new HeadObjectCommand({ Bucket: name, Key: 'stalled.bin' })),
    ).rejects.toMatchObject({
      name: 'NotFound',
    });
  });
});
