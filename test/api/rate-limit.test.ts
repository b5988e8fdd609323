import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { type Cache, redisCache } from '../../src/infra/cache.ts';
import { openRuntime } from '../../src/runtime.ts';
import { backend, namespace, secondDb, storage, testSecretKeyEnv } from '../support/backends.ts';
import {
  ADMIN_KEY,
  type CallOptions,
  keyWith,
  type Reply,
  request,
  startCoffer,
  type TestCoffer,
} from '../support/coffer.ts';
import { Exchange } from '../support/exchange.ts';
import { initiate } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import { startProxy } from '../support/proxy.ts';
import { answering } from '../support/redis.ts';
import { newS3Credential, s3ClientOf } from '../support/s3-endpoint.ts';

/** Low limits, and client addresses taken from X-Forwarded-For so that each test has its own. */
const LIMITS = {
  COFFER_TRUST_PROXY: 'true',
  COFFER_RATE_LIMIT_API_KEY_PER_MINUTE: '5',
  COFFER_RATE_LIMIT_UPLOAD_TOKEN_PER_MINUTE: '4',
  COFFER_RATE_LIMIT_IP_PER_MINUTE: '6',
  COFFER_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '3',
  COFFER_RATE_LIMIT_OBJECTS_PER_MINUTE: '4',
};

let lastAddress = 0;
/** A client address no other test uses (counters may be shared with other servers through Redis). */
const newAddress = () => {
  lastAddress += 1;
  return `198.51.${Math.floor(lastAddress / 250)}.${(lastAddress % 250) + 1}`;
};
const from = (address: string, options: CallOptions = {}): CallOptions => ({
  ...options,
  headers: { ...options.headers, 'x-forwarded-for': address },
});
const UNKNOWN_KEY = `coffer_live_${'x'.repeat(43)}`;

function expectLimited(reply: Reply, limit: number, source: string) {
  expect(reply.status).toBe(429);
  const retryAfter = Number(reply.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(reply.body).toEqual({
    error: {
      code: 'RATE_LIMITED',
      message: expect.stringContaining(`at most ${limit} a minute`),
      details: { limit, window_seconds: 60, retry_after_seconds: retryAfter, limit_source: source },
      request_id: reply.headers.get('x-request-id'),
    },
  });
  expect(reply.headers.get('ratelimit-limit')).toBe(String(limit));
  expect(reply.headers.get('ratelimit-remaining')).toBe('0');
  expect(reply.headers.get('ratelimit-reset')).toBe(String(retryAfter));
}

function expectCounted(reply: Reply, limit: number, remaining: number) {
  expect(reply.status).toBeLessThan(300);
  expect(reply.headers.get('ratelimit-limit')).toBe(String(limit));
  expect(reply.headers.get('ratelimit-remaining')).toBe(String(remaining));
  const reset = Number(reply.headers.get('ratelimit-reset'));
  expect(reset).toBeGreaterThanOrEqual(1);
  expect(reset).toBeLessThanOrEqual(60);
}

describe('rate limits', () => {
  let coffer: TestCoffer;
  beforeAll(async () => {
    coffer = await startCoffer(LIMITS);
  });
  afterAll(() => coffer?.close());

  it('limits each API key, with the RateLimit headers and a 429 RATE_LIMITED in the error body', async () => {
    const project = await coffer.newProject();
    for (let remaining = 4; remaining >= 0; remaining--) {
      expectCounted(await project.call('GET', ''), 5, remaining);
    }
    expectLimited(await project.call('GET', ''), 5, 'api_key');
    expectLimited(await project.call('GET', '/files'), 5, 'api_key');

    // Another tenant, and another key of the same project, count on their own.
    const other = await coffer.newProject();
    expectCounted(await other.call('GET', ''), 5, 4);
    expectCounted(
      await project.call('GET', '', {
        token: (await keyWith(coffer, project, ['projects:read', 'projects:update'])).key,
      }),
      5,
      4,
    );
    // The admin key, the operator's, is not limited.
    for (let i = 0; i < 7; i++) {
      const reply = await project.call('GET', '', { token: ADMIN_KEY });
      expect(reply.status).toBe(200);
      expect(reply.headers.get('ratelimit-limit')).toBeNull();
    }
  });

  it('answers the next request on the connection of a refused one, whose body it reads through', async () => {
    const project = await coffer.newProject();
    for (let remaining = 4; remaining >= 0; remaining--) {
      expectCounted(await project.call('GET', ''), 5, remaining);
    }
    const body = Buffer.from(JSON.stringify({ name: 'x'.repeat(64 * 1024) }));
    const exchange = new Exchange(coffer.url, 'PATCH', `/v1/projects/${project.id}`, {
      authorization: `Bearer ${project.key}`,
      'content-type': 'application/json',
      'content-length': String(body.length),
    });
    const refused = await exchange.next();
    expect(refused.status).toBe(429);
    // The body the client had announced, then its next request, as a keep-alive client sends them.
    await exchange.write(
      Buffer.concat([
        body,
        Buffer.from(`GET /openapi.json HTTP/1.1\r\nhost: coffer\r\nx-forwarded-for: ${newAddress()}\r\n\r\n`),
      ]),
    );
    const next = await exchange.nextWithin(10_000);
    exchange.close();
    expect(next?.status).toBe(200);
  });

  it('refuses an address after repeated failed authentication, whatever credential it sends next', async () => {
    const project = await coffer.newProject();
    const guesser = newAddress();
    const guess = (token: string) => project.call('GET', '', from(guesser, { token }));
    expect((await guess(UNKNOWN_KEY)).status).toBe(401);
    expect((await guess('coffer_upload_token_unknown')).status).toBe(401);
    expect((await project.call('GET', '', from(guesser, { token: '' }))).status).toBe(401);
    // Refused before the credential is looked at: a right guess would learn nothing either.
    expectLimited(await guess(UNKNOWN_KEY), 3, 'failed_auth');
    expectLimited(await guess(project.key), 3, 'failed_auth');
    // Other addresses, and routes that need no credential, are not affected.
    expectCounted(await project.call('GET', '', from(newAddress())), 5, 4);
    expect((await coffer.call('GET', '/openapi.json', from(guesser))).status).toBe(200);
  });

  it('counts S3 signatures that fail toward the same budget, and refuses the address on S3 as SlowDown', async () => {
    const project = await coffer.newProject();
    const created = await newS3Credential(coffer, project.id, ['files:read'], 'sdk');
    const { bucket } = (await project.call('GET', '')).body;
    const listUrl = (secret_access_key: string) =>
      getSignedUrl(
        s3ClientOf(coffer, { ...created, secret_access_key }),
        new ListObjectsV2Command({ Bucket: bucket }),
      );
    const guesser = newAddress();
    const s3 = async (secret: string) => {
      const reply = await fetch(await listUrl(secret), { headers: { 'x-forwarded-for': guesser } });
      return { status: reply.status, retryAfter: reply.headers.get('retry-after'), body: await reply.text() };
    };
    for (let i = 0; i < 3; i++) {
      expect((await s3('wrong-secret')).body).toContain('<Code>SignatureDoesNotMatch</Code>');
    }
    // The right secret now learns nothing either, on S3 and on the REST API alike.
    const refused = await s3(created.secret_access_key);
    expect(refused.status).toBe(503);
    expect(refused.body).toContain('<Code>SlowDown</Code>');
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expectLimited(await project.call('GET', '', from(guesser)), 3, 'failed_auth');
    const elsewhere = { headers: { 'x-forwarded-for': newAddress() } };
    expect((await fetch(await listUrl(created.secret_access_key), elsewhere)).status).toBe(200);
  });

  it('limits requests without a credential per client address', async () => {
    const project = await coffer.newProject();
    const client = newAddress();
    for (let remaining = 5; remaining >= 1; remaining--) {
      expectCounted(await coffer.call('GET', '/openapi.json', from(client)), 6, remaining);
    }
    expect((await coffer.call('GET', '/no/such/path', from(client))).status).toBe(404);
    expectLimited(await coffer.call('GET', '/openapi.json', from(client)), 6, 'client_ip');
    expectLimited(await coffer.call('GET', '/no/such/path', from(client)), 6, 'client_ip');
    expect((await coffer.call('GET', '/openapi.json', from(newAddress()))).status).toBe(200);
    // A caller with a credential counts against its key, not its address.
    expectCounted(await project.call('GET', '', from(client)), 5, 4);
  });

  it('limits each upload token apart from the API keys of its project', async () => {
    const project = await coffer.newProject();
    const created = await project.call('POST', '/upload-tokens', { body: {} });
    expect(created.status).toBe(201);
    const token = created.body.token as string;
    for (let remaining = 3; remaining >= 0; remaining--) {
      expectCounted(await coffer.call('GET', '/v1/whoami', { token }), 4, remaining);
    }
    expectLimited(await coffer.call('GET', '/v1/whoami', { token }), 4, 'upload_token');
    // The key made one request before (the token) and the token's did not count against it.
    expectCounted(await project.call('GET', ''), 5, 3);
    const second = await project.call('POST', '/upload-tokens', { body: {} });
    expectCounted(await coffer.call('GET', '/v1/whoami', { token: second.body.token }), 4, 3);
  });

  it("applies a project's rate_limit_per_minute to its keys, which only the admin key changes", async () => {
    const project = await coffer.newProject({ rate_limit_per_minute: 2 });
    expect((await project.call('GET', '', { token: ADMIN_KEY })).body.settings.rate_limit_per_minute).toBe(2);
    expectCounted(await project.call('GET', ''), 2, 1);
    expectCounted(await project.call('GET', ''), 2, 0);
    expectLimited(await project.call('GET', ''), 2, 'project');

    const manager = (await keyWith(coffer, project, ['projects:read', 'projects:update'])).key;
    const raise = await project.call('PATCH', '', {
      token: manager,
      body: { settings: { rate_limit_per_minute: 1000 } },
    });
    expect(raise.status).toBe(403);
    expect(raise.body.error).toMatchObject({
      code: 'INSUFFICIENT_SCOPE',
      details: { field: 'settings.rate_limit_per_minute', required_scope: 'admin' },
    });
    // Sending the value it already has changes nothing and is allowed.
    const same = await project.call('PATCH', '', {
      token: manager,
      body: { name: 'Renamed', settings: { rate_limit_per_minute: 2 } },
    });
    expect(same.status).toBe(200);

    const admin = (settings: object) => project.call('PATCH', '', { token: ADMIN_KEY, body: { settings } });
    expect((await admin({ rate_limit_per_minute: 0 })).body.error.code).toBe('VALIDATION_ERROR');
    expect((await admin({ rate_limit_per_minute: '10' })).body.error.code).toBe('BAD_REQUEST');
    expect((await admin({ rate_limit_per_minute: 10 })).status).toBe(200);
    // The key's count goes on (3 so far) under the new limit.
    expectCounted(await project.call('GET', ''), 10, 6);
    expect((await admin({ rate_limit_per_minute: null })).body.settings.rate_limit_per_minute).toBeNull();
    expectCounted(await project.call('GET', ''), 5, 0);
  });

  it('counts health probes and presigned object URLs apart from the API', async () => {
    const project = await coffer.newProject({ rate_limit_per_minute: 3 });
    const client = newAddress();
    const uploads = [await initiate(project), await initiate(project)];
    expectCounted(await project.call('GET', '', from(client)), 3, 0);
    expectLimited(await project.call('GET', '', from(client)), 3, 'project');
    for (let i = 0; i < 6; i++) await coffer.call('GET', '/openapi.json', from(client));
    expectLimited(await coffer.call('GET', '/openapi.json', from(client)), 6, 'client_ip');

    // The key and the address are at their API limits: probes still answer, and are not counted.
    for (let i = 0; i < 10; i++) {
      for (const path of ['/health/live', '/health/ready']) {
        const probe = await coffer.call('GET', path, from(client));
        expect(probe.status).toBe(200);
        expect(probe.headers.get('ratelimit-limit')).toBeNull();
      }
    }
    if (storage !== 'local') return; // object URLs are the S3 store's own
    for (const [i, upload] of uploads.entries()) {
      const put = await request(upload.upload_url, 'PUT', {
        body: upload.bytes.toString(),
        headers: { 'content-type': 'text/plain', 'x-forwarded-for': client },
      });
      expectCounted(put, 4, 3 - i);
    }
    // Every request to an object URL counts, refused ones too.
    const forged = `${coffer.url}/objects/${project.id}/file/x?expires=1&signature=forged`;
    expect((await request(forged, 'GET', from(client))).status).toBe(403);
    expect((await request(forged, 'GET', from(client))).status).toBe(403);
    expectLimited(await request(forged, 'GET', from(client)), 4, 'object_urls');
    const refusedPut = await request(uploads[0]!.upload_url, 'PUT', {
      body: 'x'.repeat(1000),
      headers: { 'content-type': 'text/plain', 'x-forwarded-for': client },
    });
    expectLimited(refusedPut, 4, 'object_urls');
    // The S3 endpoint shares their budget: refused before its signature is looked at, in S3's words
    // and with S3's ids of the request.
    const s3 = await request(`${coffer.url}/s3/bucket/key`, 'GET', from(client));
    expect(s3.status).toBe(503);
    const [requestId, hostId] = [s3.headers.get('x-amz-request-id'), s3.headers.get('x-amz-id-2')];
    expect(requestId).toBeTruthy();
    expect(hostId).toBeTruthy();
    expect(s3.body).toContain('<Code>SlowDown</Code>');
    expect(s3.body).toContain(`<RequestId>${requestId}</RequestId><HostId>${hostId}</HostId>`);
    // Object URLs at their limit leave the API alone.
    const other = await coffer.newProject();
    expectCounted(await other.call('GET', '', from(client)), 5, 4);
    expect((await coffer.call('GET', '/health/live', from(client))).status).toBe(200);
  });

  it('lets browsers read the RateLimit headers', async () => {
    const project = await coffer.newProject();
    const reply = await project.call('GET', '', { headers: { origin: 'https://app.example.com' } });
    const exposed = reply.headers.get('access-control-expose-headers')?.toLowerCase() ?? '';
    for (const name of ['retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
      expect(exposed).toContain(name);
    }
  });

  it('documents the limits and the project override in the OpenAPI document', async () => {
    const document = (await coffer.call('GET', '/openapi.json', from(newAddress()))).body;
    expect(document.components.schemas.ProjectSettingsInput.properties.rate_limit_per_minute).toMatchObject({
      minimum: 1,
      description: expect.stringContaining('admin key'),
    });
    expect(document.components.schemas.ProjectSettings.required).toContain('rate_limit_per_minute');
    expect(document.info.description).toContain('429 RATE_LIMITED with Retry-After');
  });
});

describe('rate limits by default', () => {
  let coffer: TestCoffer;
  beforeAll(async () => {
    coffer = await startCoffer({ COFFER_TRUST_PROXY: 'true' });
  });
  afterAll(() => coffer?.close());

  it('throttles wrong-key guessing from one address after 60 failures a minute', async () => {
    const project = await coffer.newProject();
    const guesser = newAddress();
    const statuses: number[] = [];
    for (let i = 0; i < 150; i++) {
      statuses.push((await project.call('GET', '', from(guesser, { token: UNKNOWN_KEY }))).status);
    }
    expect(statuses.filter((status) => status === 401)).toHaveLength(60);
    expect(statuses.slice(60).every((status) => status === 429)).toBe(true);
  });

  it('leaves a busy API key plenty of room', async () => {
    const project = await coffer.newProject();
    expectCounted(await project.call('GET', ''), 60_000, 59_999);
  });
});

describe('when the counters cannot be reached', () => {
  it('serves requests without limits (fail open) rather than refuse them', async () => {
    // A Redis that does not answer: nothing listens on this port.
    await servesWithout(await redisCache(`redis://127.0.0.1:${await freePort()}`));
  });

  it.runIf(process.env.COFFER_TEST_REDIS_URL)(
    'serves requests when Redis stops answering mid-connection',
    async () => {
      const redis = new URL(process.env.COFFER_TEST_REDIS_URL!);
      const proxy = await startProxy(redis.hostname, Number(redis.port || 6379));
      const cache = await redisCache(`redis://127.0.0.1:${proxy.port}`, `${namespace()}:hung:`);
      try {
        await answering(cache, 5000);
        proxy.freeze(); // connected and ready, then silent: each command must time out, not wait forever
        await servesWithout(cache);
      } finally {
        await proxy.close();
      }
    },
  );
});

/** Answers API requests through a runtime whose shared counters (`cache`) cannot be reached. */
async function servesWithout(cache: Cache): Promise<void> {
  const config = loadConfig({
    COFFER_DATA_DIR: mkdtempSync(join(tmpdir(), 'coffer-test-')),
    COFFER_ADMIN_KEY: ADMIN_KEY,
    COFFER_LOG_LEVEL: 'silent',
    COFFER_RATE_LIMIT_API_KEY_PER_MINUTE: '1',
    COFFER_RATE_LIMIT_IP_PER_MINUTE: '1',
    ...testSecretKeyEnv(),
  });
  const runtime = await openRuntime(config, {
    db: await secondDb(),
    cache,
    logger: pino({ level: 'silent' }),
  });
  const app = await buildApp({ config, services: runtime.services });
  try {
    const headers = { authorization: `Bearer ${ADMIN_KEY}` };
    const org = await app.inject({
      method: 'POST',
      url: '/v1/organizations',
      headers,
      body: { name: 'o' },
    });
    const project = await app.inject({
      method: 'POST',
      url: `/v1/organizations/${org.json().id}/projects`,
      headers,
      body: { name: 'p' },
    });
    const key = await app.inject({
      method: 'POST',
      url: `/v1/projects/${project.json().id}/api-keys`,
      headers,
      body: { name: 'k', scopes: ['projects:read'] },
    });
    for (let i = 0; i < 3; i++) {
      const reply = await app.inject({
        method: 'GET',
        url: `/v1/projects/${project.json().id}`,
        headers: { authorization: `Bearer ${key.json().key}` },
      });
      expect(reply.statusCode).toBe(200);
      expect(reply.headers['ratelimit-limit']).toBeUndefined();
      expect((await app.inject({ method: 'GET', url: '/openapi.json' })).statusCode).toBe(200);
    }
  } finally {
    await app.close();
    await runtime.close();
    await cache.close();
  }
}

describe.runIf(backend === 'postgres' && process.env.COFFER_TEST_REDIS_URL)(
  'two API nodes on one Redis',
  () => {
    let a: TestCoffer;
    let b: TestCoffer;
    beforeAll(async () => {
      a = await startCoffer(LIMITS);
      b = await startCoffer(LIMITS);
    });
    afterAll(async () => {
      await a?.close();
      await b?.close();
    });

    it('share the counters of keys, addresses and failed authentication', async () => {
      const project = await a.newProject();
      const path = `/v1/projects/${project.id}`;
      const nodes = [a, b, a, b, a];
      for (const [i, node] of nodes.entries()) {
        expectCounted(await node.call('GET', path, { token: project.key }), 5, 4 - i);
      }
      expectLimited(await b.call('GET', path, { token: project.key }), 5, 'api_key');
      expectLimited(await a.call('GET', path, { token: project.key }), 5, 'api_key');

      const client = newAddress();
      for (const [i, node] of [a, b, a, b, a, b].entries()) {
        expectCounted(await node.call('GET', '/openapi.json', from(client)), 6, 5 - i);
      }
      expectLimited(await a.call('GET', '/openapi.json', from(client)), 6, 'client_ip');

      // Two failures on one node and the third on the other: that one refuses the address.
      const guesser = newAddress();
      const other = await a.newProject();
      expect((await a.call('GET', path, from(guesser, { token: UNKNOWN_KEY }))).status).toBe(401);
      expect((await a.call('GET', path, from(guesser, { token: UNKNOWN_KEY }))).status).toBe(401);
      expect((await b.call('GET', path, from(guesser, { token: UNKNOWN_KEY }))).status).toBe(401);
      expectLimited(
        await b.call('GET', `/v1/projects/${other.id}`, from(guesser, { token: other.key })),
        3,
        'failed_auth',
      );
    });
  },
);
