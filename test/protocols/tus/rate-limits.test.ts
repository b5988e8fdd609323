import { randomBytes } from 'node:crypto';
import * as tus from 'tus-js-client';
import { describe, expect, it } from 'vitest';
import { cofferForSuite, type Reply, request } from '../../support/coffer.ts';
import { b64, uploadToken } from '../../support/tus-endpoint.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/** What one tus-js-client request was answered: its status and RateLimit headers. */
interface Answer {
  method: string;
  status: number;
  limit: string | undefined;
  remaining: string | undefined;
}

/** Runs a tus-js-client upload to its end (no retries: a 429 fails it); answers every answer it got. */
function upload(url: string, token: string, data: Buffer, chunkSize: number): Promise<Answer[]> {
  const answers: Answer[] = [];
  return new Promise((resolve, reject) => {
    new tus.Upload(data, {
      endpoint: `${url}/tus`,
      headers: { Authorization: `Bearer ${token}` },
      metadata: { filename: 'big.bin' },
      chunkSize,
      retryDelays: null,
      onAfterResponse: (req, res) => {
        answers.push({
          method: req.getMethod(),
          status: res.getStatus(),
          limit: res.getHeader('ratelimit-limit'),
          remaining: res.getHeader('ratelimit-remaining'),
        });
      },
      onSuccess: () => resolve(answers),
      onError: (error) => reject(Object.assign(error, { answers })),
    }).start();
  });
}

describe('tus under the default rate limits', () => {
  const coffer = cofferForSuite();

  it('lets a 1 GiB upload in 5 MiB PATCHes through without a 429', async () => {
    // Every limit counts requests in a one-minute window, whatever their size: what a 1 GiB upload in
    // 5 MiB PATCHes costs is its creation and its PATCHes, all within one window at worst. So the same
    // number of PATCHes, of a few KiB each, is charged exactly as the 1 GiB upload is, without
    // writing 1 GiB on every run of the suite.
    const patches = Math.ceil(GiB / (5 * MiB));
    const requests = 1 + patches;
    const { uploadTokenPerMinute, apiKeyPerMinute } = coffer.config.rateLimits;
    // The tightest default of a credential that uploads: a browser's upload token.
    expect(uploadTokenPerMinute).toBeLessThanOrEqual(apiKeyPerMinute);
    expect(requests).toBeLessThanOrEqual(uploadTokenPerMinute);

    const project = await coffer.newProject();
    const token = await uploadToken(project);
    const chunk = 16 * KiB;
    const answers = await upload(coffer.url, token, randomBytes(patches * chunk), chunk);

    expect(answers.map((answer) => answer.method)).toEqual(['POST', ...Array(patches).fill('PATCH')]);
    expect(answers.filter((answer) => answer.status === 429)).toEqual([]);
    // Each request was counted against the token's default limit, and the last left room.
    const last = answers.at(-1)!;
    expect(last.limit).toBe(String(uploadTokenPerMinute));
    expect(Number(last.remaining)).toBe(uploadTokenPerMinute - requests);
  });
});

describe('tus past a rate limit', () => {
  const LIMIT = 3;
  const coffer = cofferForSuite({
    COFFER_RATE_LIMIT_API_KEY_PER_MINUTE: String(LIMIT),
    COFFER_RATE_LIMIT_UPLOAD_TOKEN_PER_MINUTE: String(LIMIT),
  });

  const create = (token: string, body?: Buffer) =>
    request(`${coffer.url}/tus`, 'POST', {
      headers: {
        'tus-resumable': '1.0.0',
        authorization: `Bearer ${token}`,
        'upload-length': '10',
        'upload-metadata': `filename ${b64('a.bin')}`,
        ...(body ? { 'content-type': 'application/offset+octet-stream' } : {}),
      },
      body,
    });

  /** A 429 as a tus client reads it: the protocol's version, when to try again, and Coffer's error body. */
  function expectLimited(reply: Reply, source: string) {
    expect(reply.status).toBe(429);
    expect(reply.headers.get('tus-resumable')).toBe('1.0.0');
    const retryAfter = Number(reply.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(reply.headers.get('ratelimit-remaining')).toBe('0');
    expect(reply.body.error).toMatchObject({
      code: 'RATE_LIMITED',
      details: { limit: LIMIT, limit_source: source },
    });
  }

  it('refuses creations past the limit of an API key or an upload token with 429 and the tus headers', async () => {
    const project = await coffer.newProject();
    // The project's key made the token: one of its requests.
    const token = await uploadToken(project);
    for (const [credential, source, room] of [
      [project.key, 'api_key', LIMIT - 1],
      [token, 'upload_token', LIMIT],
    ] as const) {
      for (let i = 0; i < room; i++) {
        const created = await create(credential);
        expect(created.status).toBe(201);
        expect(created.headers.get('ratelimit-remaining')).toBe(String(room - 1 - i));
      }
      expectLimited(await create(credential), source);
      // A refused creation with bytes is refused alike (its bytes are not read).
      expectLimited(await create(credential, Buffer.alloc(10)), source);
    }
  });

  it('refuses a PATCH past the limit, which leaves the offset where it was', async () => {
    const project = await coffer.newProject();
    const created = await create(project.key);
    expect(created.status).toBe(201);
    const url = created.headers.get('location')!;
    const patch = (offset: number) =>
      request(url, 'PATCH', {
        headers: {
          'tus-resumable': '1.0.0',
          authorization: `Bearer ${project.key}`,
          'upload-offset': String(offset),
          'content-type': 'application/offset+octet-stream',
        },
        body: Buffer.alloc(4),
      });
    // The creation and two PATCHes fill the limit; the third PATCH is past it.
    expect((await patch(0)).status).toBe(204);
    expect((await patch(4)).status).toBe(204);
    expectLimited(await patch(8), 'api_key');
    // The refused PATCH stored nothing: the upload stands where the second left it, as the database
    // records it (a HEAD would be refused as well until the window ends).
    const [row] = await coffer.services.db.query<{ upload_offset: string }>(
      'SELECT upload_offset FROM tus_uploads WHERE file_id = $1',
      [created.headers.get('x-coffer-file-id')],
    );
    expect(Number(row!.upload_offset)).toBe(8);
  });
});
