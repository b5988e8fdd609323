import { createHash } from 'node:crypto';
import { CofferError, createClient } from '@coffer/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { backend, storage } from '../support/backends.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import {
  bytesOf,
  EXPIRED_ANSWER,
  type Harness,
  MIB,
  OBJECTS,
  partOf,
  startHarness,
} from './support/harness.ts';
import { requestsTo } from './support/http-proxy.ts';

let harness: Harness;
let project: TestProject;

beforeAll(async () => {
  harness = await startHarness();
  project = await harness.coffer.newProject();
});
afterAll(async () => harness?.close());
afterEach(() => {
  harness.proxy.intercept = undefined;
});

const since = () => {
  const start = harness.proxy.seen.length;
  return (method: string, path: RegExp) =>
    requestsTo({ ...harness.proxy, seen: harness.proxy.seen.slice(start) }, method, path);
};
const INITIATE = /\/files\/upload$/;
const CONFIRM = /\/confirm$/;
const multipart = { partSize: 5 * MIB, multipartThreshold: 0 };

describe('retries', () => {
  it('sends an API call and a PUT again after a 5xx, and a confirm after a cut connection', async () => {
    const count = since();
    const failed = new Set<string>();
    harness.proxy.intercept = (request) => {
      const kind = OBJECTS.test(request.url) ? 'put' : INITIATE.test(request.url) ? 'initiate' : '';
      if (kind && !failed.has(kind)) {
        failed.add(kind);
        return {
          status: kind === 'put' ? 502 : 503,
          body: '{"error":{"code":"X","message":"down","request_id":"r"}}',
        };
      }
      if (CONFIRM.test(request.url) && !failed.has('confirm')) {
        failed.add('confirm');
        return 'cut';
      }
      return undefined;
    };
    const bytes = bytesOf(2000);
    const file = await harness.client(project).upload(project.id, bytes, { filename: 'retry.bin' });
    expect(file.status).toBe('ready');
    expect(count('POST', INITIATE)).toHaveLength(2);
    expect(count('PUT', OBJECTS)).toHaveLength(2);
    expect(count('POST', CONFIRM)).toHaveLength(2);
  });

  it('gives up after the attempts allowed, with the last error', async () => {
    const count = since();
    harness.proxy.intercept = () => ({
      status: 503,
      body: JSON.stringify({ error: { code: 'STORE_UNAVAILABLE', message: 'busy', request_id: 'req_x' } }),
    });
    const error = await harness
      .client(project, { retry: { attempts: 3, baseDelayMs: 1 } })
      .files.get(project.id, 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CofferError);
    expect(error).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE', requestId: 'req_x' });
    expect(count('GET', /\/files\//)).toHaveLength(3);
  });

  it('never retries a 4xx', async () => {
    const count = since();
    await expect(
      harness.client(project).files.get(project.id, 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV'),
    ).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(count('GET', /\/files\//)).toHaveLength(1);
  });

  it('asks once for a fresh URL when a part URL is refused (expired), and fails when it is refused again', async () => {
    // The part PUT meets an expired URL: S3 itself refuses it on S3 storage, the proxy answers as
    // AWS would on local storage.
    let refused = 0;
    harness.proxy.intercept = (request) => {
      if (request.method !== 'PUT' || partOf(request.url) !== 2 || refused >= 1) return undefined;
      refused++;
      return harness.expired(request);
    };
    const count = since();
    const bytes = bytesOf(11 * MIB);
    const file = await harness
      .client(project)
      .upload(project.id, bytes, { ...multipart, filename: 'expiry.bin' });
    await harness.expectChecksum(project, file, bytes);
    const partUrls = count('GET', /\/part-url$/).map((r) => partOf(r.url));
    expect(partUrls.filter((part) => part === 2)).toHaveLength(2);
    expect(partUrls.filter((part) => part !== 2)).toHaveLength(2);
    expect(count('PUT', OBJECTS).filter((r) => partOf(r.url) === 2)).toHaveLength(2);

    harness.proxy.intercept = (request) =>
      request.method === 'PUT' && partOf(request.url) === 1 ? harness.expired(request) : undefined;
    const again = since();
    const error = await harness
      .client(project)
      .upload(project.id, bytesOf(6 * MIB), { ...multipart, filename: 'expired.bin' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CofferError);
    if (storage === 's3') {
      // radosgw's own refusal: AccessDenied with its request id (and an empty <Message>, unlike AWS).
      expect(error).toMatchObject({
        status: 403,
        code: 'AccessDenied',
        requestId: expect.stringMatching(/^tx/),
      });
    } else {
      expect(error).toMatchObject({
        status: EXPIRED_ANSWER.status,
        code: 'AccessDenied',
        message: 'Request has expired',
        requestId: 's3req',
      });
    }
    expect(again('GET', /\/part-url$/).filter((r) => partOf(r.url) === 1)).toHaveLength(2);
    expect(again('PUT', OBJECTS).filter((r) => partOf(r.url) === 1)).toHaveLength(2);
  });
});

describe('upload tokens', () => {
  const sha = (value: string) => createHash('sha256').update(value).digest('hex');
  const expire = (token: string) =>
    harness.coffer.services.db.query(
      "UPDATE upload_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1",
      [sha(token)],
    );
  const newToken = async () => {
    const { token } = await harness
      .client(project)
      .uploadTokens.create(project.id, { owner_user_id: 'user_1' });
    return token;
  };

  it('calls refreshToken once on TOKEN_EXPIRED and sends the request again with the new token', async () => {
    const token = await newToken();
    await expire(token);
    let refreshes = 0;
    const client = harness.client(project, {
      token,
      refreshToken: async () => {
        refreshes++;
        return newToken();
      },
    });
    const file = await client.upload(project.id, bytesOf(100), { filename: 'token.bin' });
    expect(file).toMatchObject({ owner_user_id: 'user_1', status: 'ready' });
    expect(refreshes).toBe(1);
  });

  it('refreshes once for parallel part requests, and the new token finishes the old session', async () => {
    const token = await newToken();
    let refreshes = 0;
    const client = harness.client(project, {
      token,
      refreshToken: async () => {
        refreshes++;
        return newToken();
      },
      // The token expires right after the session starts: the parallel part URL calls all meet it.
      fetch: async (url, init) => {
        const response = await fetch(url, init);
        if (url.endsWith('/multipart/start')) await expire(token);
        return response;
      },
    });
    const bytes = bytesOf(16 * MIB);
    const file = await client.upload(project.id, bytes, {
      ...multipart,
      concurrency: 4,
      filename: 'parallel.bin',
    });
    await harness.expectChecksum(project, file, bytes);
    expect(refreshes).toBe(1);
  });

  it('does not refresh twice for one request, nor without refreshToken', async () => {
    const token = await newToken();
    await expire(token);
    let refreshes = 0;
    const stale = harness.client(project, {
      token,
      refreshToken: () => {
        refreshes++;
        return token;
      },
    });
    await expect(stale.upload(project.id, bytesOf(10))).rejects.toMatchObject({
      status: 401,
      code: 'TOKEN_EXPIRED',
    });
    expect(refreshes).toBe(1);
    await expect(harness.client(project, { token }).upload(project.id, bytesOf(10))).rejects.toMatchObject({
      code: 'TOKEN_EXPIRED',
    });
  });
});

describe('abort', () => {
  it('aborts the requests in flight and ends the multipart session', async () => {
    const controller = new AbortController();
    harness.proxy.putDelayMs = 300;
    harness.proxy.intercept = (request) => {
      if (request.method === 'PUT') controller.abort();
      return undefined;
    };
    const count = since();
    try {
      const error = await harness
        .client(project)
        .upload(project.id, bytesOf(11 * MIB), { ...multipart, signal: controller.signal })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'CofferError', code: 'ABORTED', status: 0 });
    } finally {
      harness.proxy.putDelayMs = 0;
    }
    const [ended] = count('DELETE', /\/multipart\/session_/);
    expect(ended).toBeDefined();
    const uploadId = ended!.url.split('/').at(-1)!;
    const session = await project.call('GET', `/files/upload/multipart/${uploadId}`);
    expect(session.body.status).toBe('aborted');
    expect((await project.call('GET', `/files/${session.body.file_id}`)).body.status).toBe('failed');
  });

  it('rejects at once with a signal already aborted, before anything is sent', async () => {
    const count = since();
    await expect(
      harness.client(project).upload(project.id, bytesOf(10), { signal: AbortSignal.abort() }),
    ).rejects.toMatchObject({ code: 'ABORTED' });
    expect(count('POST', /./)).toHaveLength(0);
  });
});

describe('resume', () => {
  it('keeps the session of an aborted resumable upload, then sends only the missing parts', async () => {
    const store = new Map();
    const bytes = bytesOf(17 * MIB);
    const blob = new File([bytes], 'resume.bin', {
      type: 'application/octet-stream',
      lastModified: 1_700_000_000_000,
    });
    // The "crash": parts 1 and 2 are stored, then the upload stops as part 3 is being sent.
    const controller = new AbortController();
    harness.proxy.intercept = (request) => {
      if (request.method === 'PUT' && partOf(request.url) === 3) {
        controller.abort();
        return 'cut';
      }
      return undefined;
    };
    const first = since();
    const options = { ...multipart, concurrency: 1, resume: true, resumeStore: store };
    await expect(
      harness.client(project).upload(project.id, blob, { ...options, signal: controller.signal }),
    ).rejects.toMatchObject({ code: 'ABORTED' });
    expect(first('PUT', OBJECTS).map((r) => partOf(r.url))).toEqual([1, 2, 3]);
    expect(first('DELETE', /./)).toHaveLength(0);
    expect(store.size).toBe(1);
    harness.proxy.intercept = undefined;

    // A new client (a reloaded page) with the same file: only parts 3 and 4 are sent.
    const events: number[] = [];
    const second = since();
    const file = await createClient({ baseUrl: harness.proxy.url, apiKey: project.key }).upload(
      project.id,
      blob,
      {
        ...options,
        onProgress: ({ loaded }) => events.push(loaded),
      },
    );
    expect(second('PUT', OBJECTS).map((r) => partOf(r.url))).toEqual([3, 4]);
    expect(second('POST', /\/multipart\/start$/)).toHaveLength(0);
    expect(file).toMatchObject({ filename: 'resume.bin', size_bytes: bytes.length, status: 'ready' });
    await harness.expectChecksum(project, file, bytes);
    expect(events[0]).toBe(10 * MIB);
    expect(events.at(-1)).toBe(bytes.length);
    expect(store.size).toBe(0);
  });

  it('starts again when the remembered session is gone', async () => {
    const store = new Map();
    const bytes = bytesOf(6 * MIB);
    const controller = new AbortController();
    harness.proxy.intercept = (request) => {
      if (request.method === 'PUT') controller.abort();
      return undefined;
    };
    const options = { ...multipart, resume: true, resumeStore: store, filename: 'gone.bin' };
    await expect(
      harness.client(project).upload(project.id, bytes, { ...options, signal: controller.signal }),
    ).rejects.toMatchObject({ code: 'ABORTED' });
    harness.proxy.intercept = undefined;
    const [entry] = [...store.values()];
    await project.call('DELETE', `/files/upload/multipart/${entry.uploadId}`);

    const count = since();
    const file = await harness.client(project).upload(project.id, bytes, options);
    await harness.expectChecksum(project, file, bytes);
    expect(count('POST', /\/multipart\/start$/)).toHaveLength(1);
    expect(store.size).toBe(0);
  });
});

// A real limit's window is a minute: run once, on the embedded server, so that the wait is paid once.
describe.skipIf(backend !== 'embedded')('rate limits', () => {
  let limited: TestCoffer;
  beforeAll(async () => {
    limited = await startCoffer({ COFFER_RATE_LIMIT_API_KEY_PER_MINUTE: '2' });
  });
  afterAll(() => limited?.close());

  it('waits as long as Retry-After asks on a 429, then sends the call again', {
    timeout: 120_000,
  }, async () => {
    const limitedProject = await limited.newProject();
    const sent: { at: number; status: number; retryAfter: string | null }[] = [];
    const client = createClient({
      baseUrl: limited.url,
      apiKey: limitedProject.key,
      fetch: async (url, init) => {
        const response = await fetch(url, init);
        sent.push({
          at: Date.now(),
          status: response.status,
          retryAfter: response.headers.get('retry-after'),
        });
        return response;
      },
    });
    await client.projects.get(limitedProject.id);
    await client.projects.get(limitedProject.id);
    const once = createClient({ baseUrl: limited.url, apiKey: limitedProject.key, retry: { attempts: 1 } });
    const refused = await once.projects.get(limitedProject.id).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CofferError);
    expect(refused).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect((refused as CofferError).retryAfterMs).toBeGreaterThan(0);

    const project = await client.projects.get(limitedProject.id);
    expect(project.id).toBe(limitedProject.id);
    const [, , refusedAgain, passed] = sent;
    expect(refusedAgain).toMatchObject({ status: 429 });
    expect(passed).toMatchObject({ status: 200 });
    expect(passed!.at - refusedAgain!.at).toBeGreaterThanOrEqual(
      Number(refusedAgain!.retryAfter) * 1000 - 1000,
    );
  });
});
