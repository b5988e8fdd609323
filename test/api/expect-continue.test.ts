import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { LocalObjectStore } from '../../src/infra/storage/local/store.ts';
import { Sha256 } from '../../src/protocols/s3/canonical.ts';
import { storage } from '../support/backends.ts';
import { request, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { type Answer, Exchange } from '../support/exchange.ts';
import { newS3Credential } from '../support/s3-endpoint.ts';

// Expect: 100-continue, as botocore, tus-java-client and curl send it: Coffer answers 100 Continue
// only once it reads the body, so a request it refuses gets the refusal as its only answer and the
// client never sends the body.

let coffer: TestCoffer;
let project: TestProject;
let bucket: string;
let s3Keys: { id: string; secret: string };
beforeAll(async () => {
  coffer = await startCoffer();
  project = await coffer.newProject();
  bucket = (await project.call('GET', '')).body.bucket;
  const credential = await newS3Credential(coffer, project.id, ['files:read', 'files:upload']);
  s3Keys = { id: credential.access_key_id, secret: credential.secret_access_key };
});
afterAll(() => coffer?.close());

const MiB = 1024 * 1024;
/** What a refused client announces and never sends: 5 GiB, S3's largest PUT. */
const HUGE = String(5 * 1024 * MiB);
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** A request to Coffer, its head sent, its body held back. */
const sendHead = (method: string, path: string, headers: Record<string, string>) =>
  new Exchange(coffer.url, method, path, headers);

/** A refusal that is the request's only answer: no 100 Continue before it, and the connection closes. */
async function expectRefusal(
  exchange: Exchange,
  status: number,
  thenSend?: () => Promise<void>,
): Promise<Answer> {
  const answer = await exchange.next();
  expect(answer.status, answer.body).toBe(status);
  // The client may still send the body it announced: the connection serves no other request.
  expect(answer.headers.connection).toBe('close');
  await thenSend?.();
  await exchange.closed;
  return answer;
}

/**
 * Makes `object[method]` wait a moment before it runs, to tell a 100 Continue sent once the request
 * got past it from one sent before: `passed()` is whether it has been called and waited.
 */
function slowed<T extends object>(object: T, method: keyof T & string) {
  const original = object[method] as (...args: unknown[]) => unknown;
  let passed = false;
  const spy = vi.spyOn(object, method as never).mockImplementation((async (...args: unknown[]) => {
    await sleep(300);
    passed = true;
    return original.apply(object, args);
  }) as never);
  return { passed: () => passed, restore: () => spy.mockRestore() };
}

/** Sends `body` once the server asked for it: a 100 Continue first, after `gate` passed, then the final answer. */
async function expectContinued(exchange: Exchange, body: Buffer, gate: () => boolean): Promise<Answer> {
  const first = await exchange.next();
  expect(first.status, first.body).toBe(100);
  expect(gate()).toBe(true);
  await exchange.write(body);
  const answer = await exchange.next();
  // The body was asked for and sent: the connection may serve the next request.
  expect(answer.headers.connection).not.toBe('close');
  exchange.close();
  return answer;
}

const signer = (secret: string, accessKeyId = s3Keys.id) =>
  new SignatureV4({
    credentials: { accessKeyId, secretAccessKey: secret },
    region: 'us-east-1',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
  });

/** The headers of a PUT of `path` under /s3, signed with `secret` as an SDK signs them. */
async function s3Headers(
  path: string,
  headers: Record<string, string>,
  secret: string,
  accessKeyId?: string,
) {
  const { hostname, port, host } = new URL(coffer.url);
  const signed = await signer(secret, accessKeyId).sign({
    method: 'PUT',
    protocol: 'http:',
    hostname,
    port: Number(port),
    path,
    query: {},
    headers: { host, ...headers },
  });
  const { host: _host, ...rest } = signed.headers;
  return { ...rest, expect: '100-continue' };
}

const PAYLOADS: Record<string, Record<string, string>> = {
  'a literal SHA-256': { 'x-amz-content-sha256': sha256(Buffer.from('never sent')) },
  'UNSIGNED-PAYLOAD': { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD': {
    'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    'content-encoding': 'aws-chunked',
    'x-amz-decoded-content-length': String(4 * 1024 * MiB),
  },
  'STREAMING-UNSIGNED-PAYLOAD-TRAILER': {
    'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    'content-encoding': 'aws-chunked',
    'x-amz-decoded-content-length': String(4 * 1024 * MiB),
    'x-amz-trailer': 'x-amz-checksum-crc32',
  },
};

describe('S3 PutObject with Expect: 100-continue', () => {
  it.each(Object.keys(PAYLOADS))(
    'answers a wrong signature (%s) with 403 SignatureDoesNotMatch, without asking for the body',
    async (payload) => {
      const path = `/s3/${bucket}/refused.bin`;
      const headers = await s3Headers(path, { 'content-length': HUGE, ...PAYLOADS[payload] }, 'wrong secret');
      const answer = await expectRefusal(sendHead('PUT', path, headers), 403);
      expect(answer.headers['content-type']).toMatch(/^application\/xml/);
      expect(answer.body).toContain('<Code>SignatureDoesNotMatch</Code>');
    },
  );

  it('answers an unknown access key with 403 InvalidAccessKeyId, without asking for the body', async () => {
    const path = `/s3/${bucket}/refused.bin`;
    const headers = await s3Headers(
      path,
      { 'content-length': HUGE, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
      s3Keys.secret,
      'AKIAUNKNOWNKEY000000',
    );
    const answer = await expectRefusal(sendHead('PUT', path, headers), 403);
    expect(answer.body).toContain('<Code>InvalidAccessKeyId</Code>');
  });

  it('answers an expired presigned PUT with 403 AccessDenied, without asking for the body', async () => {
    const path = `/s3/${bucket}/expired.bin`;
    const { hostname, port, host } = new URL(coffer.url);
    const presigned = await signer(s3Keys.secret).presign(
      { method: 'PUT', protocol: 'http:', hostname, port: Number(port), path, query: {}, headers: { host } },
      { expiresIn: 60, signingDate: new Date(Date.now() - 3_600_000) },
    );
    const query = new URLSearchParams(presigned.query as Record<string, string>).toString();
    const exchange = sendHead('PUT', `${path}?${query}`, {
      'content-length': HUGE,
      expect: '100-continue',
    });
    const answer = await expectRefusal(exchange, 403);
    expect(answer.body).toContain('<Code>AccessDenied</Code>');
    expect(answer.body).toContain('Request has expired');
  });

  it.each(['after the refusal', 'without waiting for an answer'])(
    'never takes the bytes of a body sent anyway (%s) for another request',
    async (when) => {
      const path = `/s3/${bucket}/refused.bin`;
      const smuggled = `GET /v1/projects/${project.id}/files HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${project.key}\r\n\r\n`;
      const headers = await s3Headers(
        path,
        { 'content-length': String(smuggled.length), 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
        'wrong secret',
      );
      const emit = vi.spyOn(coffer.app.server, 'emit');
      try {
        const exchange = sendHead('PUT', path, headers);
        const sendBody = () => exchange.write(Buffer.from(smuggled)).catch(() => undefined);
        if (when !== 'after the refusal') await sendBody();
        const answer = await expectRefusal(exchange, 403, async () => {
          if (when === 'after the refusal') await sendBody();
        });
        expect(answer.body).toContain('<Code>SignatureDoesNotMatch</Code>');
        const requests = (emit.mock.calls as unknown[][]).filter(([event]) => event === 'request');
        expect(requests.map(([, raw]) => (raw as { url: string }).url)).toEqual([path]);
      } finally {
        emit.mockRestore();
      }
    },
  );

  it('asks for the body of a correctly signed PutObject once its signature is checked, then stores it', async () => {
    const data = randomBytes(MiB);
    const path = `/s3/${bucket}/continued.bin`;
    const headers = await s3Headers(
      path,
      { 'content-length': String(data.length), 'x-amz-content-sha256': sha256(data) },
      s3Keys.secret,
    );
    const lookup = slowed(coffer.services.s3Credentials, 'resolveS3Credential');
    try {
      const answer = await expectContinued(sendHead('PUT', path, headers), data, lookup.passed);
      expect(answer.status, answer.body).toBe(200);
      expect(answer.headers.etag).toBe(`"${createHash('md5').update(data).digest('hex')}"`);
    } finally {
      lookup.restore();
    }
  });
});

describe('tus PATCH with Expect: 100-continue', () => {
  const tusHeaders = (extra: Record<string, string> = {}) => ({
    'tus-resumable': '1.0.0',
    authorization: `Bearer ${project.key}`,
    ...extra,
  });

  async function created(length: number): Promise<string> {
    const reply = await request(`${coffer.url}/tus`, 'POST', {
      headers: tusHeaders({
        'upload-length': String(length),
        'upload-metadata': `filename ${Buffer.from('a.bin').toString('base64')}`,
      }),
    });
    expect(reply.status).toBe(201);
    return new URL(reply.headers.get('location')!).pathname;
  }

  const patchHeaders = (offset: number, length: string) =>
    tusHeaders({
      'content-type': 'application/offset+octet-stream',
      'upload-offset': String(offset),
      'content-length': length,
      expect: '100-continue',
    });

  it('answers a wrong Upload-Offset with 409, without asking for the body', async () => {
    const path = await created(5 * 1024 * MiB);
    const answer = await expectRefusal(sendHead('PATCH', path, patchHeaders(MiB, HUGE)), 409);
    expect(JSON.parse(answer.body).error.message).toMatch(/Upload-Offset does not match/);
    // Nothing was received: the upload is where it was.
    const head = await request(`${coffer.url}${path}`, 'HEAD', { headers: tusHeaders() });
    expect(head.headers.get('upload-offset')).toBe('0');
  });

  it('answers a body longer than the upload with 413, without asking for the body', async () => {
    const path = await created(MiB);
    const answer = await expectRefusal(sendHead('PATCH', path, patchHeaders(0, HUGE)), 413);
    expect(JSON.parse(answer.body).error.code).toBe('FILE_TOO_LARGE');
  });

  it('answers an unknown upload with 404, without asking for the body', async () => {
    const path = `/tus/${'0'.repeat(32)}`;
    await expectRefusal(sendHead('PATCH', path, patchHeaders(0, HUGE)), 404);
  });

  it('answers an unknown API key with 401, without asking for the body', async () => {
    const path = await created(MiB);
    const headers = { ...patchHeaders(0, HUGE), authorization: `Bearer coffer_live_${'x'.repeat(43)}` };
    await expectRefusal(sendHead('PATCH', path, headers), 401);
  });

  it('asks for the body of a PATCH at the right offset once its credential is checked, then takes it', async () => {
    const data = randomBytes(MiB);
    const path = await created(data.length);
    const auth = slowed(coffer.services.projects, 'resolveApiKeyWithProject');
    try {
      const exchange = sendHead('PATCH', path, patchHeaders(0, String(data.length)));
      const answer = await expectContinued(exchange, data, auth.passed);
      expect(answer.status, answer.body).toBe(204);
      expect(answer.headers['upload-offset']).toBe(String(data.length));
    } finally {
      auth.restore();
    }
  });
});

describe.skipIf(storage !== 'local')('presigned PUT (upload_url) with Expect: 100-continue', () => {
  const SIZE = MiB;

  async function uploadUrl(): Promise<string> {
    const reply = await project.call('POST', '/files/upload', {
      body: { filename: 'a.bin', content_type: 'application/octet-stream', size_bytes: SIZE },
    });
    expect(reply.status).toBe(201);
    const url = new URL(reply.body.upload_url);
    return `${url.pathname}${url.search}`;
  }

  const putHeaders = (length: string) => ({
    'content-type': 'application/octet-stream',
    'content-length': length,
    expect: '100-continue',
  });

  it('answers a wrong signature with 403, without asking for the body', async () => {
    const url = new URL(await uploadUrl(), coffer.url);
    const sig = url.searchParams.get('sig')!;
    url.searchParams.set('sig', `${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`);
    const exchange = sendHead('PUT', `${url.pathname}${url.search}`, putHeaders(HUGE));
    const answer = await expectRefusal(exchange, 403);
    expect(JSON.parse(answer.body).error.message).toMatch(/signature is invalid/);
  });

  it('answers an expired URL with 403, without asking for the body', async () => {
    const store = coffer.services.store as LocalObjectStore;
    const key = decodeURIComponent(new URL(await uploadUrl(), coffer.url).pathname.slice('/objects/'.length));
    const expired = new URL(
      await store.presignUpload(key, {
        size: SIZE,
        contentType: 'application/octet-stream',
        expiresAt: new Date(Date.now() - 60_000),
      }),
    );
    const exchange = sendHead('PUT', `${expired.pathname}${expired.search}`, putHeaders(HUGE));
    const answer = await expectRefusal(exchange, 403);
    expect(JSON.parse(answer.body).error.message).toMatch(/expired/);
  });

  it('asks for the body of a valid URL once the store reads it, then stores it', async () => {
    const data = randomBytes(SIZE);
    const path = await uploadUrl();
    const store = coffer.services.store as LocalObjectStore;
    const receive = slowed(store, 'receive');
    try {
      const answer = await expectContinued(
        sendHead('PUT', path, putHeaders(String(SIZE))),
        data,
        receive.passed,
      );
      expect(answer.status, answer.body).toBe(200);
      expect(answer.headers.etag).toBeDefined();
    } finally {
      receive.restore();
    }
  });
});

describe('JSON requests with Expect: 100-continue', () => {
  const body = Buffer.from(JSON.stringify({ filename: 'a.txt', content_type: 'text/plain', size_bytes: 11 }));
  const jsonHeaders = (key: string) => ({
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    'content-length': String(body.length),
    expect: '100-continue',
  });

  it('asks for a JSON body once the caller is authenticated, as the body parser reads it', async () => {
    const auth = slowed(coffer.services.projects, 'resolveApiKeyWithProject');
    try {
      const exchange = sendHead('POST', `/v1/projects/${project.id}/files/upload`, jsonHeaders(project.key));
      const answer = await expectContinued(exchange, body, auth.passed);
      expect(answer.status, answer.body).toBe(201);
      expect(JSON.parse(answer.body).file_id).toBeDefined();
    } finally {
      auth.restore();
    }
  });

  it('answers an unknown API key with 401, without asking for the body', async () => {
    const path = `/v1/projects/${project.id}/files/upload`;
    await expectRefusal(sendHead('POST', path, jsonHeaders(`coffer_live_${'x'.repeat(43)}`)), 401);
  });
});
