import { randomBytes } from 'node:crypto';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storage } from '../support/backends.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, upload } from '../support/files.ts';
import { newS3Credential, s3ClientOf } from '../support/s3-endpoint.ts';

const APP = 'https://app.example.com';
const EVIL = 'https://evil.example.com';

interface Sent {
  status: number;
  headers: Headers;
  text: string;
}

/** A request whose whole body is read, so that no connection stays busy (the server could not close). */
async function send(url: string, init?: RequestInit): Promise<Sent> {
  const response = await fetch(url, init);
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** A browser's preflight: OPTIONS with Origin and the Access-Control-Request-* headers. */
function preflight(url: string, origin: string, method: string, headers = 'authorization,content-type') {
  return send(url, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': headers,
    },
  });
}

/** On S3 the object URLs are the bucket's, whose CORS rules are the operator's (see the README). */
const objectUrlsServedHere = it.skipIf(storage === 's3');

const list = (value: string | null) => (value ?? '').split(',').map((part) => part.trim().toLowerCase());

/** What a browser checks before sending the real request. */
function expectPreflightAllowed(reply: Sent, origin: string, method: string) {
  expect(reply.status).toBeGreaterThanOrEqual(200);
  expect(reply.status).toBeLessThan(300);
  expect(reply.headers.get('access-control-allow-origin')).toBe(origin);
  expect(list(reply.headers.get('access-control-allow-methods'))).toContain(method.toLowerCase());
  const allowedHeaders = list(reply.headers.get('access-control-allow-headers'));
  expect(allowedHeaders).toContain('authorization');
  expect(allowedHeaders).toContain('content-type');
}

/** The three kinds of URL a browser calls during an upload: a token endpoint, the PUT URL and a GET URL. */
async function urls(coffer: TestCoffer, project: TestProject) {
  const token = await project.call('POST', '/upload-tokens', { body: {} });
  expect(token.status).toBe(201);
  const started = await initiate(project, { token: token.body.token });
  const ready = (await upload(project, { bytes: 'downloadable' })).body;
  const download = await project.call('GET', `/files/${ready.id}/download`);
  expect(download.status).toBe(200);
  return {
    token: token.body.token as string,
    initiate: `${coffer.url}/v1/projects/${project.id}/files/upload`,
    put: started.upload_url,
    bytes: started.bytes,
    get: download.body.url as string,
  };
}

describe('CORS with an origin list', () => {
  let coffer: TestCoffer;
  let project: TestProject;
  let target: Awaited<ReturnType<typeof urls>>;

  beforeAll(async () => {
    coffer = await startCoffer({ COFFER_CORS_ORIGINS: APP });
    project = await coffer.newProject();
    target = await urls(coffer, project);
  });
  afterAll(() => coffer.close());

  it('answers the preflight of the initiate endpoint for an allowed origin', async () => {
    const reply = await preflight(target.initiate, APP, 'POST');
    expectPreflightAllowed(reply, APP, 'POST');
    expect(list(reply.headers.get('vary'))).toContain('origin');
  });

  objectUrlsServedHere('answers the preflight of a presigned PUT URL and a presigned GET URL', async () => {
    expectPreflightAllowed(await preflight(target.put, APP, 'PUT', 'content-type'), APP, 'PUT');
    expectPreflightAllowed(await preflight(target.put, APP, 'PUT'), APP, 'PUT');
    expectPreflightAllowed(await preflight(target.get, APP, 'GET', 'range'), APP, 'GET');
    expectPreflightAllowed(await preflight(target.get, APP, 'GET'), APP, 'GET');
  });

  objectUrlsServedHere(
    'lets the allowed origin read the real responses of the token endpoint and the object URLs',
    async () => {
      const initiated = await send(target.initiate, {
        method: 'POST',
        headers: { origin: APP, authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ filename: 'b.txt', content_type: 'text/plain', size_bytes: 3 }),
      });
      expect(initiated.status).toBe(201);
      expect(initiated.headers.get('access-control-allow-origin')).toBe(APP);

      const stored = await send(target.put, {
        method: 'PUT',
        headers: { origin: APP, 'content-type': 'text/plain' },
        body: target.bytes,
      });
      expect(stored.status).toBe(200);
      expect(stored.headers.get('access-control-allow-origin')).toBe(APP);
      expect(list(stored.headers.get('access-control-expose-headers'))).toContain('etag');

      const got = await send(target.get, { headers: { origin: APP } });
      expect(got.status).toBe(200);
      expect(got.text).toBe('downloadable');
      expect(got.headers.get('access-control-allow-origin')).toBe(APP);
      expect(list(got.headers.get('access-control-expose-headers'))).toContain('content-disposition');
    },
  );

  objectUrlsServedHere(
    'keeps Access-Control-Allow-Origin on error responses, so the browser can read the error body',
    async () => {
      const unauthenticated = await send(target.initiate, {
        method: 'POST',
        headers: {
          origin: APP,
          authorization: 'Bearer coffer_upload_token_unknown',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ filename: 'b.txt', content_type: 'text/plain', size_bytes: 3 }),
      });
      expect(unauthenticated.status).toBe(401);
      expect(unauthenticated.headers.get('access-control-allow-origin')).toBe(APP);
      expect(JSON.parse(unauthenticated.text).error.code).toBe('UNAUTHENTICATED');

      const invalid = await send(target.initiate, {
        method: 'POST',
        headers: { origin: APP, authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ filename: 'b.txt', content_type: 'text/plain', size_bytes: 'three' }),
      });
      expect(invalid.status).toBe(400);
      expect(invalid.headers.get('access-control-allow-origin')).toBe(APP);

      const tampered = await send(target.get.replace(/sig=[0-9a-f]{4}/, 'sig=0000'), {
        headers: { origin: APP },
      });
      expect(tampered.status).toBe(403);
      expect(tampered.headers.get('access-control-allow-origin')).toBe(APP);

      const noRoute = await send(`${coffer.url}/v1/nowhere`, { headers: { origin: APP } });
      expect(noRoute.status).toBe(404);
      expect(noRoute.headers.get('access-control-allow-origin')).toBe(APP);
    },
  );

  it('gives another origin no Access-Control-Allow-Origin', async () => {
    for (const [url, method] of [
      [target.initiate, 'POST'],
      [target.put, 'PUT'],
      [target.get, 'GET'],
    ] as const) {
      const reply = await preflight(url, EVIL, method);
      expect(reply.headers.get('access-control-allow-origin'), `${method} ${url}`).toBeNull();
    }
    const real = await send(target.get, { headers: { origin: EVIL } });
    expect(real.headers.get('access-control-allow-origin')).toBeNull();
    const error = await send(target.initiate, {
      method: 'POST',
      headers: { origin: EVIL, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(error.status).toBe(401);
    expect(error.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('CORS by default', () => {
  let coffer: TestCoffer;
  let target: Awaited<ReturnType<typeof urls>>;

  beforeAll(async () => {
    coffer = await startCoffer();
    expect(coffer.config.corsOrigins).toBe('*');
    target = await urls(coffer, await coffer.newProject());
  });
  afterAll(() => coffer.close());

  objectUrlsServedHere('allows any origin on the token endpoint and the object URLs', async () => {
    for (const origin of [APP, EVIL]) {
      expectPreflightAllowed(await preflight(target.initiate, origin, 'POST'), '*', 'POST');
      expectPreflightAllowed(await preflight(target.put, origin, 'PUT'), '*', 'PUT');
      expectPreflightAllowed(await preflight(target.get, origin, 'GET'), '*', 'GET');
    }
    const error = await send(target.initiate, {
      method: 'POST',
      headers: { origin: EVIL, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(error.status).toBe(401);
    expect(error.headers.get('access-control-allow-origin')).toBe('*');
    const got = await send(target.get, { headers: { origin: EVIL } });
    expect(got.status).toBe(200);
    expect(got.text).toBe('downloadable');
    expect(got.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('CORS of the S3 endpoint', () => {
  let coffer: TestCoffer;
  let project: TestProject;

  beforeAll(async () => {
    coffer = await startCoffer({ COFFER_CORS_ORIGINS: APP });
    project = await coffer.newProject();
  });
  afterAll(() => coffer.close());

  // What a browser S3 client (Uppy, the AWS SDK) asks to send with an UploadPart or a PutObject.
  const S3_HEADERS =
    'content-md5,content-type,x-amz-checksum-crc32,x-amz-content-sha256,x-amz-date,x-amz-meta-camera,x-amz-security-token,x-amz-user-agent';

  it('allows the headers an S3 client asks for, for an allowed origin, and exposes the ETag', async () => {
    const object = `${coffer.url}/s3/bucket/photos/cat.jpg?partNumber=1&uploadId=u`;
    for (const method of ['PUT', 'POST', 'GET', 'HEAD', 'DELETE']) {
      const reply = await preflight(object, APP, method, S3_HEADERS);
      expect(reply.status).toBe(204);
      expect(reply.headers.get('access-control-allow-origin')).toBe(APP);
      expect(list(reply.headers.get('access-control-allow-methods'))).toContain(method.toLowerCase());
      expect(list(reply.headers.get('access-control-allow-headers'))).toEqual(S3_HEADERS.split(','));
      expect(list(reply.headers.get('vary'))).toContain('access-control-request-headers');
      // As S3 answers a preflight too.
      expect(reply.headers.get('x-amz-request-id')).toBeTruthy();
      expect(reply.headers.get('x-amz-id-2')).toBeTruthy();
    }
    // The mount itself (ListBuckets) is S3's too.
    expect(
      list(
        (await preflight(`${coffer.url}/s3`, APP, 'GET', S3_HEADERS)).headers.get(
          'access-control-allow-headers',
        ),
      ),
    ).toContain('x-amz-date');

    // A real answer, here a refusal in S3's XML: the browser may read it and the S3 headers.
    const refused = await send(object, { method: 'PUT', headers: { origin: APP }, body: 'part' });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('<Code>AccessDenied</Code>');
    expect(refused.headers.get('access-control-allow-origin')).toBe(APP);
    const exposed = list(refused.headers.get('access-control-expose-headers'));
    const s3Headers = [
      'etag',
      'x-amz-request-id',
      'x-amz-id-2',
      'x-amz-version-id',
      'x-amz-mp-parts-count',
      'x-coffer-file-id',
      'x-amz-checksum-crc32',
    ];
    for (const header of s3Headers) expect(exposed).toContain(header);
  });

  it('answers a GetObject with the headers of its HeadObject, CORS and request id included, whole and in a range', async () => {
    const client = s3ClientOf(
      coffer,
      await newS3Credential(coffer, project.id, ['files:read', 'files:upload']),
    );
    const { bucket } = (await project.call('GET', '')).body;
    // Values that change from one request to the next, and the connection's own headers.
    const varying = new Set([
      'date',
      'x-amz-request-id',
      'x-amz-id-2',
      'x-request-id',
      'ratelimit-remaining',
      'ratelimit-reset',
    ]);
    const connection = new Set(['connection', 'keep-alive']);
    const shown = (headers: Headers) =>
      Object.fromEntries(
        [...headers]
          .filter(([name]) => !connection.has(name))
          .map(([name, value]) => [name, varying.has(name) ? '…' : value]),
      );
    // One object kept in its sidecar, one in a file of its own.
    for (const [Key, data] of [
      ['small.txt', Buffer.from('0123456789')],
      ['large.bin', randomBytes(300_000)],
    ] as const) {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: data }));
      const get = await getSignedUrl(client, new GetObjectCommand({ Bucket: bucket, Key }));
      // The SDK asks every GetObject for the object's checksums (x-amz-checksum-mode): the HEAD asks too.
      const head = await getSignedUrl(
        client,
        new HeadObjectCommand({ Bucket: bucket, Key, ChecksumMode: 'ENABLED' }),
      );
      for (const range of [undefined, 'bytes=2-5']) {
        const headers = { origin: APP, ...(range ? { range } : {}) };
        const got = await fetch(get, { headers });
        expect(Buffer.from(await got.arrayBuffer()).equals(range ? data.subarray(2, 6) : data)).toBe(true);
        expect(got.status).toBe(range ? 206 : 200);
        expect(got.headers.get('access-control-allow-origin')).toBe(APP);
        expect(list(got.headers.get('access-control-expose-headers'))).toContain('x-amz-request-id');
        expect(got.headers.get('x-amz-request-id')).toBeTruthy();
        expect(got.headers.get('x-amz-request-id')).toBe(got.headers.get('x-request-id'));
        const headed = await fetch(head, { method: 'HEAD', headers });
        expect(shown(got.headers), `${Key} ${range}`).toEqual(shown(headed.headers));
      }
    }
  });

  it('keeps the REST API to its own list of headers, and other origins out of both', async () => {
    const rest = await preflight(
      `${coffer.url}/v1/projects/${project.id}/files/upload`,
      APP,
      'POST',
      S3_HEADERS,
    );
    expect(rest.headers.get('access-control-allow-origin')).toBe(APP);
    expect(list(rest.headers.get('access-control-allow-headers'))).not.toContain('x-amz-date');
    expect(list(rest.headers.get('access-control-allow-methods'))).toContain('patch');
    // A path that only begins like the mount is not S3's.
    const lookalike = await preflight(`${coffer.url}/s3x`, APP, 'PUT', S3_HEADERS);
    expect(list(lookalike.headers.get('access-control-allow-headers'))).not.toContain('x-amz-date');

    const evil = await preflight(`${coffer.url}/s3/bucket/key`, EVIL, 'PUT', S3_HEADERS);
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();
    const real = await send(`${coffer.url}/s3/bucket/key`, {
      method: 'PUT',
      headers: { origin: EVIL },
      body: 'x',
    });
    expect(real.headers.get('access-control-allow-origin')).toBeNull();
  });
});
