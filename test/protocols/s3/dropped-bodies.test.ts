import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { Exchange } from '../../support/exchange.ts';
import { s3EndpointSuite, signedHeaders } from '../../support/s3-endpoint.ts';

const { coffer, bucketWith } = s3EndpointSuite();
const MiB = 1024 * 1024;

describe('an S3 PutObject whose client drops before its body is read', () => {
  it('ends as a body cut by its client, answered 400, nothing stored', async () => {
    const { name, keys, client } = await bucketWith();
    const { s3Credentials, store } = coffer.services;
    const resolve = s3Credentials.resolveS3Credential;
    const write = store.write;
    // The credential is looked up once the client is gone: the body was ended before anything read it.
    const looked = Promise.withResolvers<void>();
    const gone = Promise.withResolvers<void>();
    s3Credentials.resolveS3Credential = async (...args) => {
      looked.resolve();
      await gone.promise;
      return resolve.apply(s3Credentials, args);
    };
    const writes: Promise<unknown>[] = [];
    store.write = (...args: Parameters<typeof write>) => {
      const written = write.apply(store, args);
      writes.push(written.catch((error: unknown) => error));
      return written;
    };
    const requests: { req: IncomingMessage; res: ServerResponse }[] = [];
    const seen = (req: IncomingMessage, res: ServerResponse) => requests.push({ req, res });
    coffer.app.server.on('request', seen);
    try {
      const path = `/s3/${name}/dropped.bin`;
      const headers = await signedHeaders(coffer, keys, {
        method: 'PUT',
        path,
        headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'content-length': String(2 * MiB) },
      });
      // A few bytes, which the server takes in whole: it sees the connection close at once.
      const exchange = new Exchange(coffer.url, 'PUT', path, headers);
      await exchange.write(randomBytes(1024));
      await looked.promise;
      exchange.close();
      await expect.poll(() => requests[0]?.req.errored).toBeTruthy();
      gone.resolve();
      // The store's write ends with the request's own error, which is the client's: 400, not a 5xx.
      await expect.poll(() => writes.length).toBe(1);
      expect(
        await Promise.race([writes[0], new Promise((done) => setTimeout(() => done('pending'), 3000))]),
      ).toBe(requests[0]!.req.errored);
      await expect.poll(() => requests[0]!.res.statusCode).toBe(400);
      await expect(
        client.send(new HeadObjectCommand({ Bucket: name, Key: 'dropped.bin' })),
      ).rejects.toMatchObject({
        name: 'NotFound',
      });
    } finally {
      coffer.app.server.off('request', seen);
      s3Credentials.resolveS3Credential = resolve;
      store.write = write;
    }
  });
});
