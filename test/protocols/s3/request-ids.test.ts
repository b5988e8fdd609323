import {
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { madeBeforeAll, request } from '../../support/coffer.ts';
import { s3EndpointSuite } from '../../support/s3-endpoint.ts';

// The names the S3 endpoint gives every answer, x-amz-request-id and x-amz-id-2, as the current AWS SDK
// for JavaScript reads them; a path it cannot decode is answered by them too.
const { coffer, bucketWith } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  const bucket = madeBeforeAll(() => bucketWith());

  it('names every answer by x-amz-request-id and x-amz-id-2, as S3 does, an error document by them too', async () => {
    const { client, name } = bucket;
    const token = /^[A-Za-z0-9+/]{20,}={0,2}$/;
    const ids = (headers: Headers) => {
      const named = { request: headers.get('x-amz-request-id'), host: headers.get('x-amz-id-2') };
      expect(named.request).toBeTruthy();
      expect(named.host).toMatch(token);
      return named;
    };
    // The SDK reads them into the metadata of an answer, and of a refusal.
    const put = await client.send(new PutObjectCommand({ Bucket: name, Key: 'ids.txt', Body: 'ids' }));
    const again = await client.send(new PutObjectCommand({ Bucket: name, Key: 'ids.txt', Body: 'ids' }));
    expect(put.$metadata.requestId).toBeTruthy();
    expect(put.$metadata.extendedRequestId).toMatch(token);
    expect(again.$metadata.extendedRequestId).not.toBe(put.$metadata.extendedRequestId);
    const missing = await client
      .send(new GetObjectCommand({ Bucket: name, Key: 'none.txt' }))
      .catch((e) => e);
    expect(missing).toBeInstanceOf(S3ServiceException);
    expect((missing as S3ServiceException).$metadata.extendedRequestId).toMatch(token);
    // An object's bytes, whole and not modified, and a listing.
    const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: name, Key: 'ids.txt' }));
    const got = await fetch(url);
    expect(await got.text()).toBe('ids');
    ids(got.headers);
    const unchanged = await fetch(url, { headers: { 'if-none-match': put.ETag! } });
    expect(unchanged.status).toBe(304);
    ids(unchanged.headers);
    ids((await fetch(await getSignedUrl(client, new ListObjectsV2Command({ Bucket: name })))).headers);
    // A refusal: its document names the request as its headers do; a HEAD's, without a body.
    for (const method of ['GET', 'HEAD', 'PATCH']) {
      const refused = await fetch(`${coffer.url}/s3/${name}/ids.txt`, { method });
      expect(refused.status).toBeGreaterThanOrEqual(400);
      const { request, host } = ids(refused.headers);
      const body = await refused.text();
      if (method === 'HEAD') expect(body).toBe('');
      else expect(body).toContain(`<RequestId>${request}</RequestId><HostId>${host}</HostId>`);
    }
  });

  it('refuses a path it cannot decode (a malformed percent escape) as S3 does: 400 InvalidURI, with its ids', async () => {
    const { name } = bucket;
    for (const path of [`/${name}/%zz`, `/${name}/a/%E0%A4%A`, '/%zz/key.txt', '/%zz']) {
      for (const method of ['GET', 'HEAD', 'PUT']) {
        const label = `${method} ${path}`;
        const refused = await fetch(`${coffer.url}/s3${path}`, {
          method,
          body: method === 'PUT' ? 'x' : undefined,
        });
        expect(refused.status, label).toBe(400);
        const id = refused.headers.get('x-amz-request-id');
        const host = refused.headers.get('x-amz-id-2');
        expect(id, label).toBeTruthy();
        expect(refused.headers.get('x-request-id'), label).toBe(id);
        expect(host, label).toMatch(/^[A-Za-z0-9+/]{20,}={0,2}$/);
        const body = await refused.text();
        if (method === 'HEAD') {
          expect(body, label).toBe('');
          continue;
        }
        expect(refused.headers.get('content-type'), label).toMatch(/^application\/xml/);
        expect(body, label).toContain(
          '<Error><Code>InvalidURI</Code><Message>Couldn&apos;t parse the specified URI.</Message>' +
            `<Resource>${path}</Resource><RequestId>${id}</RequestId><HostId>${host}</HostId></Error>`,
        );
      }
    }
    // A path that merely begins like the mount is the REST API's.
    const rest = await request(`${coffer.url}/s3%zz`, 'GET');
    expect(rest.status).toBe(400);
    expect(rest.body.error.code).toBe('BAD_REQUEST');
    expect(rest.headers.get('x-amz-request-id')).toBeNull();
  });
});
