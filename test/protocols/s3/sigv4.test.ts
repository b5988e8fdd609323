import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { inspect, promisify } from 'node:util';
import {
  type ChecksumAlgorithm,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type S3Request, SigV4Error } from '../../../src/protocols/s3/sigv4.ts';
import {
  ACCESS_KEY,
  CaptureServer,
  putSignedChunks,
  REGION,
  SECRET_KEY,
  SESSION_TOKEN,
  TOKEN_KEY,
  TOKEN_SECRET,
} from './capture.ts';

const server = new CaptureServer();
let origin = '';
let endpoint = '';

beforeAll(async () => {
  origin = await server.start();
  endpoint = `${origin}/s3`;
});
afterAll(() => server.stop());
beforeEach(() => {
  server.hooks = {};
});

function client(config: Partial<S3ClientConfig> = {}): S3Client {
  return new S3Client({
    endpoint,
    forcePathStyle: true,
    region: REGION,
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
    // A refused request must reach the test as it was answered, not be retried or clock-corrected.
    maxAttempts: 1,
    logger: { debug() {}, info() {}, warn() {}, error() {} },
    ...config,
  });
}

/** A stream body of `parts`, so the SDK sends it aws-chunked with a trailing checksum. */
const streamOf = (...parts: string[]) => Readable.from(parts.map((part) => Buffer.from(part)));

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** Expects `promise` (an SDK call or fetch) to have been refused with S3 `code` and `status`. */
async function refused(promise: Promise<unknown>, code: string, status: number) {
  await expect(promise).rejects.toMatchObject({ name: code, $metadata: { httpStatusCode: status } });
  expect(server.last).toMatchObject({ code, status, sinkFinished: false });
}

describe('header-signed requests from @aws-sdk/client-s3', () => {
  it('accepts a streamed PutObject (aws-chunked, STREAMING-UNSIGNED-PAYLOAD-TRAILER, CRC32 trailer)', async () => {
    const output = await client().send(
      new PutObjectCommand({
        Bucket: 'b',
        Key: 'a b/c+d~e.txt',
        Body: streamOf('hello ', 'world'),
        ContentLength: 11,
      }),
    );
    const outcome = server.last;
    expect(outcome.headers['x-amz-content-sha256']).toBe('STREAMING-UNSIGNED-PAYLOAD-TRAILER');
    expect(outcome.headers['x-amz-trailer']).toBe('x-amz-checksum-crc32');
    expect(outcome.status).toBe(200);
    expect(outcome.body?.toString()).toBe('hello world');
    expect(outcome.sinkFinished).toBe(true);
    expect(outcome.auth).toMatchObject({
      accessKeyId: ACCESS_KEY,
      presigned: false,
      payload: { kind: 'chunked-unsigned-trailer', decodedLength: 11, trailer: 'crc32' },
    });
    expect(output.ChecksumCRC32).toBe('DUoRhQ==');
  });

  it.each(['CRC32C', 'CRC64NVME', 'SHA1', 'SHA256'] as ChecksumAlgorithm[])(
    'accepts a streamed PutObject with ChecksumAlgorithm %s in the trailer',
    async (algorithm) => {
      await client().send(
        new PutObjectCommand({
          Bucket: 'b',
          Key: 'k',
          Body: streamOf('checksum ', 'me'),
          ContentLength: 11,
          ChecksumAlgorithm: algorithm,
        }),
      );
      expect(server.last.headers['x-amz-trailer']).toBe(`x-amz-checksum-${algorithm.toLowerCase()}`);
      expect(server.last).toMatchObject({ status: 200, sinkFinished: true });
      expect(server.last.body?.toString()).toBe('checksum me');
    },
  );

  it('accepts a buffered PutObject: literal SHA-256 and an x-amz-checksum-crc32 header', async () => {
    await client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: 'hello world' }));
    expect(server.last.headers['x-amz-checksum-crc32']).toBe('DUoRhQ==');
    expect(server.last.auth?.payload).toEqual({ kind: 'sha256', hash: sha256('hello world') });
    expect(server.last.body?.toString()).toBe('hello world');
  });

  it("accepts PutObject with requestChecksumCalculation 'WHEN_REQUIRED' (literal hash, no checksum)", async () => {
    const body = Buffer.from('when required');
    await client({ requestChecksumCalculation: 'WHEN_REQUIRED' }).send(
      new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: body }),
    );
    expect(server.last.headers['x-amz-content-sha256']).toBe(sha256(body));
    expect(server.last.auth?.bodyDigests.checksums).toEqual({});
    expect(server.last.body).toEqual(body);
  });

  it('checks Content-MD5: a right one passes, a wrong one is BadDigest, a malformed one InvalidDigest', async () => {
    const body = 'md5 me';
    const md5 = createHash('md5').update(body).digest('base64');
    await client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: body, ContentMD5: md5 }));
    expect(server.last.status).toBe(200);
    const other = createHash('md5').update('other').digest('base64');
    await refused(
      client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: body, ContentMD5: other })),
      'BadDigest',
      400,
    );
    await refused(
      client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: body, ContentMD5: 'not-md5' })),
      'InvalidDigest',
      400,
    );
  });

  const oddKeys = [
    'a b/c+d~e.txt',
    'ünï/cødé/日本語',
    "x/%41%/?#[]@!$&'()*,;=",
    ' leading and trailing ',
    'a//b/./../c',
  ];
  it.each(oddKeys)('accepts GetObject of the odd key %j', async (Key) => {
    const output = await client().send(new GetObjectCommand({ Bucket: 'b', Key, Range: 'bytes=0-4' }));
    expect(await output.Body?.transformToString()).toBe('object body');
    expect(server.last).toMatchObject({ status: 200, method: 'GET' });
  });

  it('accepts ListObjectsV2 with odd query values (spaces, unicode, +, ~, /, =, &)', async () => {
    await client().send(
      new ListObjectsV2Command({
        Bucket: 'b',
        Prefix: 'a b+c~/ü/',
        Delimiter: '/',
        StartAfter: 'x=y&z',
        ContinuationToken: 'ab+/cd==',
        MaxKeys: 7,
      }),
    );
    expect(server.last.status).toBe(200);
    expect(server.last.url).toContain('prefix=a%20b%2Bc~%2F%C3%BC%2F');
  });

  it('accepts temporary credentials with their session token', async () => {
    await client({
      credentials: { accessKeyId: TOKEN_KEY, secretAccessKey: TOKEN_SECRET, sessionToken: SESSION_TOKEN },
    }).send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: 'temporary' }));
    expect(server.last.auth).toMatchObject({ accessKeyId: TOKEN_KEY, sessionToken: SESSION_TOKEN });
  });
});

describe('refusals of header-signed requests', () => {
  it('refuses a wrong secret (SignatureDoesNotMatch) and an unknown key (InvalidAccessKeyId)', async () => {
    const put = () => new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: 'x' });
    await refused(
      client({ credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: 'wrong' } }).send(put()),
      'SignatureDoesNotMatch',
      403,
    );
    await refused(
      client({ credentials: { accessKeyId: 'AKIDUNKNOWN', secretAccessKey: SECRET_KEY } }).send(put()),
      'InvalidAccessKeyId',
      403,
    );
    await refused(
      client({
        credentials: { accessKeyId: TOKEN_KEY, secretAccessKey: TOKEN_SECRET, sessionToken: 'forged' },
      }).send(put()),
      'InvalidToken',
      400,
    );
  });

  it('passes on the lookup refusing an expired token', async () => {
    server.hooks.lookup = async () => {
      throw new SigV4Error('ExpiredToken');
    };
    await refused(
      client({
        credentials: { accessKeyId: TOKEN_KEY, secretAccessKey: TOKEN_SECRET, sessionToken: SESSION_TOKEN },
      }).send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })),
      'ExpiredToken',
      400,
    );
  });

  it('refuses a tampered header, path or query with SignatureDoesNotMatch', async () => {
    const get = () => client().send(new GetObjectCommand({ Bucket: 'b', Key: 'k', Range: 'bytes=0-4' }));
    server.hooks.tamper = (request) => {
      (request.headers as Record<string, string>).range = 'bytes=0-5';
    };
    await refused(get(), 'SignatureDoesNotMatch', 403);
    server.hooks.tamper = (request) => {
      request.path = request.path.replace('/k', '/K');
    };
    await refused(get(), 'SignatureDoesNotMatch', 403);
    server.hooks.tamper = (request) => {
      request.query = request.query.replace('x-id=GetObject', 'x-id=GetObject&versionId=1');
    };
    await refused(get(), 'SignatureDoesNotMatch', 403);
  });

  it('refuses an x-amz-* header that the signature does not cover', async () => {
    server.hooks.tamper = (request) => {
      (request.headers as Record<string, string>)['x-amz-acl'] = 'public-read';
    };
    await refused(client().send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })), 'AccessDenied', 403);
    expect(server.last.message).toBe('There were headers present in the request which were not signed');
  });

  it('refuses a signed header that is missing from the request', async () => {
    server.hooks.tamper = (request) => {
      delete (request.headers as Record<string, string>)['amz-sdk-request'];
    };
    await refused(client().send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })), 'AccessDenied', 403);
  });

  it('refuses a skewed clock (RequestTimeTooSkewed) and a wrong region (AuthorizationHeaderMalformed)', async () => {
    server.hooks.now = () => new Date(Date.now() + 16 * 60_000);
    await refused(
      client().send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })),
      'RequestTimeTooSkewed',
      403,
    );
    server.hooks.now = () => new Date(Date.now() - 16 * 60_000);
    await refused(
      client().send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })),
      'RequestTimeTooSkewed',
      403,
    );
    server.hooks.now = () => new Date(Date.now() + 14 * 60_000);
    await client().send(new GetObjectCommand({ Bucket: 'b', Key: 'k' }));
    server.hooks = {};
    await refused(
      client({ region: 'eu-west-1' }).send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })),
      'AuthorizationHeaderMalformed',
      400,
    );
    expect(server.last.message).toContain("the region 'eu-west-1' is wrong; expecting 'us-east-1'");
  });

  it('refuses a tampered body byte: XAmzContentSHA256Mismatch for a literal hash, BadDigest for a trailer', async () => {
    const flip = (raw: Buffer) => {
      const copy = Buffer.from(raw);
      const at = copy.indexOf('hello');
      copy[at] = 'j'.charCodeAt(0);
      return copy;
    };
    server.hooks.tamperBody = flip;
    await refused(
      client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: 'hello world' })),
      'XAmzContentSHA256Mismatch',
      400,
    );
    await refused(
      client().send(
        new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: streamOf('hello world'), ContentLength: 11 }),
      ),
      'BadDigest',
      400,
    );
    expect(server.last.message).toBe('The CRC32 you specified did not match the calculated checksum.');
  });

  it('refuses a tampered trailer checksum and a body cut short', async () => {
    server.hooks.tamperBody = (raw) =>
      Buffer.from(raw.toString('latin1').replace(/crc32c:[^\r]+/, 'crc32c:AAAAAA=='), 'latin1');
    await refused(
      client().send(
        new PutObjectCommand({
          Bucket: 'b',
          Key: 'k',
          Body: streamOf('abc'),
          ContentLength: 3,
          ChecksumAlgorithm: 'CRC32C',
        }),
      ),
      'BadDigest',
      400,
    );
    server.hooks.tamperBody = (raw) => raw.subarray(0, raw.indexOf('0\r\n'));
    await refused(
      client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: streamOf('abc'), ContentLength: 3 })),
      'IncompleteBody',
      400,
    );
  });

  const header = (request: S3Request, name: string, value: string | undefined) => {
    const headers = request.headers as Record<string, string | undefined>;
    if (value === undefined) delete headers[name];
    else headers[name] = value;
  };
  /** Drops a header from the request and from the signed list, so the checks after the signed list see it gone. */
  const unsign = (request: S3Request, name: string) => {
    header(request, name, undefined);
    header(request, 'authorization', String(request.headers.authorization).replace(`;${name}`, ''));
  };
  it.each<[string, (request: S3Request) => void, string, number]>([
    [
      'a SigV2 Authorization',
      (r) => header(r, 'authorization', 'AWS AKID:c2lnbmF0dXJl'),
      'InvalidRequest',
      400,
    ],
    [
      'an Authorization without SignedHeaders',
      (r) => header(r, 'authorization', String(r.headers.authorization).replace(/SignedHeaders=[^,]+,/, '')),
      'AuthorizationHeaderMalformed',
      400,
    ],
    [
      'a credential dated another day',
      (r) => header(r, 'authorization', String(r.headers.authorization).replace(/\/\d{8}\//, '/20200101/')),
      'AuthorizationHeaderMalformed',
      400,
    ],
    [
      'a credential for another service',
      (r) => header(r, 'authorization', String(r.headers.authorization).replace('/s3/', '/sqs/')),
      'AuthorizationHeaderMalformed',
      400,
    ],
    ['no x-amz-date', (r) => header(r, 'x-amz-date', undefined), 'AccessDenied', 403],
    ['a signed header that is missing', (r) => header(r, 'x-amz-trailer', undefined), 'AccessDenied', 403],
    ['no x-amz-content-sha256', (r) => unsign(r, 'x-amz-content-sha256'), 'InvalidRequest', 400],
    [
      'a bogus x-amz-content-sha256',
      (r) => header(r, 'x-amz-content-sha256', 'bogus'),
      'InvalidArgument',
      400,
    ],
    [
      'no x-amz-decoded-content-length',
      (r) => unsign(r, 'x-amz-decoded-content-length'),
      'MissingSecurityHeader',
      400,
    ],
    [
      'an unsupported x-amz-trailer',
      (r) => header(r, 'x-amz-trailer', 'x-amz-checksum-md5'),
      'InvalidRequest',
      400,
    ],
  ])('refuses %s', async (_what, tamper, code, status) => {
    server.hooks.tamper = tamper;
    await refused(
      client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: streamOf('abc'), ContentLength: 3 })),
      code,
      status,
    );
  });

  it('still answers when a large upload fails early, leaving the rest of the body unread', async () => {
    const chunk = Buffer.alloc(1 << 20, 1);
    async function* chunks() {
      for (let i = 0; i < 16; i++) yield chunk;
    }
    let first = true;
    const answer = await putSignedChunks({
      url: `${endpoint}/b/k`,
      chunks: chunks(),
      decodedLength: 16 << 20,
      frame: (piece) => {
        if (!first) return piece;
        first = false;
        return piece.replace(/=(.)/, (_m, c) => `=${c === '0' ? '1' : '0'}`);
      },
    });
    expect([answer.status, server.last.code]).toEqual([403, 'SignatureDoesNotMatch']);
    expect(server.last.bodyLength).toBeLessThanOrEqual(1 << 20);
  });

  it('refuses a body shorter than x-amz-decoded-content-length', async () => {
    await refused(
      client().send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: streamOf('abc'), ContentLength: 4 })),
      'IncompleteBody',
      400,
    );
  });
});

describe('presigned URLs from @aws-sdk/s3-request-presigner', () => {
  const plain = () => client({ requestChecksumCalculation: 'WHEN_REQUIRED' });

  it('accepts a presigned GET of an odd key and a presigned PUT', async () => {
    const key = 'dir with space/ü+~=x';
    const get = await getSignedUrl(plain(), new GetObjectCommand({ Bucket: 'b', Key: key }), {
      expiresIn: 300,
    });
    const answer = await fetch(get);
    expect(answer.status).toBe(200);
    expect(server.last.auth).toMatchObject({
      presigned: true,
      payload: { kind: 'unsigned' },
      signedHeaders: ['host'],
    });

    const put = await getSignedUrl(plain(), new PutObjectCommand({ Bucket: 'b', Key: key }), {
      expiresIn: 300,
    });
    const body = Buffer.from('uploaded through a presigned URL');
    expect((await fetch(put, { method: 'PUT', body })).status).toBe(200);
    expect(server.last.body).toEqual(body);
  });

  it('accepts a presigned URL with a session token', async () => {
    const url = await getSignedUrl(
      client({
        requestChecksumCalculation: 'WHEN_REQUIRED',
        credentials: { accessKeyId: TOKEN_KEY, secretAccessKey: TOKEN_SECRET, sessionToken: SESSION_TOKEN },
      }),
      new GetObjectCommand({ Bucket: 'b', Key: 'k' }),
    );
    expect((await fetch(url)).status).toBe(200);
    expect(server.last.auth?.sessionToken).toBe(SESSION_TOKEN);
  });

  it('verifies the checksum a presigned PUT carries, as S3 does (the SDK default signs CRC32 of nothing)', async () => {
    const url = await getSignedUrl(client(), new PutObjectCommand({ Bucket: 'b', Key: 'k' }));
    expect(url).toContain('x-amz-checksum-crc32=AAAAAA%3D%3D');
    const answer = await fetch(url, { method: 'PUT', body: 'not empty' });
    expect(answer.status).toBe(400);
    expect(await answer.text()).toContain('<Code>BadDigest</Code>');
    expect((await fetch(url, { method: 'PUT', body: '' })).status).toBe(200);
  });

  it('refuses an expired URL, one not valid yet, a tampered one and one for another region', async () => {
    const url = await getSignedUrl(plain(), new GetObjectCommand({ Bucket: 'b', Key: 'k' }), {
      expiresIn: 60,
    });
    server.hooks.now = () => new Date(Date.now() + 61_000);
    let answer = await fetch(url);
    expect(answer.status).toBe(403);
    expect(server.last).toMatchObject({ code: 'AccessDenied', message: 'Request has expired' });

    server.hooks.now = () => new Date(Date.now() - 16 * 60_000);
    answer = await fetch(url);
    expect(server.last).toMatchObject({ code: 'AccessDenied', message: 'Request is not valid yet' });

    server.hooks = {};
    answer = await fetch(url.replace('X-Amz-Expires=60', 'X-Amz-Expires=600'));
    expect(server.last).toMatchObject({ code: 'SignatureDoesNotMatch', status: 403 });
    answer = await fetch(url.replace('/s3/b/k', '/s3/b/K'));
    expect(server.last).toMatchObject({ code: 'SignatureDoesNotMatch', status: 403 });

    const other = await getSignedUrl(
      client({ region: 'eu-west-1' }),
      new GetObjectCommand({ Bucket: 'b', Key: 'k' }),
    );
    answer = await fetch(other);
    expect(answer.status).toBe(400);
    expect(server.last).toMatchObject({ code: 'AuthorizationQueryParametersError' });

    answer = await fetch(url.replace('X-Amz-Expires=60', 'X-Amz-Expires=604801'));
    expect(server.last).toMatchObject({ code: 'AuthorizationQueryParametersError' });
  });

  it('refuses a request with no signature, or with two', async () => {
    expect((await fetch(`${endpoint}/b/k`)).status).toBe(403);
    expect(server.last.code).toBe('AccessDenied');
    const url = await getSignedUrl(plain(), new GetObjectCommand({ Bucket: 'b', Key: 'k' }));
    await fetch(url, { headers: { authorization: 'AWS4-HMAC-SHA256 Credential=x' } });
    expect(server.last.code).toBe('InvalidArgument');
  });
});

describe('STREAMING-AWS4-HMAC-SHA256-PAYLOAD (signed chunks)', () => {
  const parts = [Buffer.alloc(70_000, 'a'), Buffer.alloc(9000, 'b'), Buffer.from('tail')];
  const total = parts.reduce((sum, part) => sum + part.length, 0);
  const url = () => `${endpoint}/b/signed%20chunks/ü`;

  it.each([false, true])('accepts signed chunks (signed CRC32 trailer: %s)', async (trailer) => {
    const answer = await putSignedChunks({ url: url(), chunks: parts, decodedLength: total, trailer });
    expect(answer.status, answer.body).toBe(200);
    expect(server.last.body).toEqual(Buffer.concat(parts));
    expect(server.last.auth?.payload).toMatchObject({
      kind: 'chunked-signed',
      decodedLength: total,
      trailer: trailer ? 'crc32' : undefined,
      signedTrailer: trailer,
    });
    // The derived key never shows when the result is serialised or inspected.
    const payload = server.last.auth?.payload as { signingKey: object };
    expect(JSON.parse(JSON.stringify(payload.signingKey))).toEqual({
      amzDate: expect.any(String),
      scope: expect.stringMatching(/^\d{8}\/us-east-1\/s3\/aws4_request$/),
    });
    expect(inspect(payload.signingKey, { showHidden: true })).not.toMatch(/Uint8Array|<Buffer/);
  });

  it('refuses a tampered chunk signature, chunk byte, trailer or decoded length', async () => {
    const flipSignature = (piece: string, kind: string) =>
      kind === 'header' && piece.startsWith('2328')
        ? piece.replace(/=(.)/, (_m, c) => `=${c === '0' ? '1' : '0'}`)
        : piece;
    let answer = await putSignedChunks({
      url: url(),
      chunks: parts,
      decodedLength: total,
      frame: flipSignature,
    });
    expect([answer.status, server.last.code]).toEqual([403, 'SignatureDoesNotMatch']);
    expect(server.last.sinkFinished).toBe(false);

    server.hooks.tamperBody = (raw) => {
      const copy = Buffer.from(raw);
      copy[copy.indexOf('bbbb')] = 'c'.charCodeAt(0);
      return copy;
    };
    answer = await putSignedChunks({ url: url(), chunks: parts, decodedLength: total });
    expect([answer.status, server.last.code]).toEqual([403, 'SignatureDoesNotMatch']);
    server.hooks = {};

    const badTrailer = (piece: string, kind: string) =>
      kind === 'trailer' ? piece.replace(/crc32:[^\r]+/, 'crc32:AAAAAA==') : piece;
    answer = await putSignedChunks({
      url: url(),
      chunks: parts,
      decodedLength: total,
      trailer: true,
      frame: badTrailer,
    });
    expect([answer.status, server.last.code]).toEqual([403, 'SignatureDoesNotMatch']);

    answer = await putSignedChunks({ url: url(), chunks: parts, decodedLength: total + 1 });
    expect([answer.status, server.last.code]).toEqual([400, 'IncompleteBody']);
    answer = await putSignedChunks({ url: url(), chunks: parts, decodedLength: total - 1 });
    expect([answer.status, server.last.code]).toEqual([400, 'IncompleteBody']);

    answer = await putSignedChunks({ url: url(), chunks: parts, decodedLength: total, secret: 'wrong' });
    expect([answer.status, server.last.code]).toEqual([403, 'SignatureDoesNotMatch']);
  });

  it('streams megabyte chunks through with flat memory', async () => {
    const chunk = Buffer.alloc(4 << 20, 7);
    async function* chunks() {
      for (let i = 0; i < 8; i++) yield chunk;
    }
    const answer = await putSignedChunks({
      url: url(),
      chunks: chunks(),
      decodedLength: 32 << 20,
      trailer: true,
    });
    expect(answer.status, answer.body).toBe(200);
    expect(server.last.bodyLength).toBe(32 << 20);
    expect(server.last.peakBufferGrowth).toBeLessThan(16 << 20);
  });
});

describe('large bodies', () => {
  it('streams a 64 MiB PutObject (CRC32 and CRC64NVME trailers) with flat memory', async () => {
    for (const algorithm of ['CRC32', 'CRC64NVME'] as ChecksumAlgorithm[]) {
      const piece = Buffer.alloc(1 << 20);
      async function* body() {
        for (let i = 0; i < 64; i++) {
          piece.fill(i);
          yield Buffer.from(piece);
        }
      }
      await client().send(
        new PutObjectCommand({
          Bucket: 'b',
          Key: 'large',
          Body: Readable.from(body()),
          ContentLength: 64 << 20,
          ChecksumAlgorithm: algorithm,
        }),
      );
      expect(server.last).toMatchObject({ status: 200, bodyLength: 64 << 20, sinkFinished: true });
      // Live buffers include the client's own, in this same process; a verifier that held the body would need 64 MiB.
      expect(server.last.peakBufferGrowth).toBeLessThan(24 << 20);
    }
  }, 120_000);
});

// botocore signs with code of its own; it is exercised where python3-boto3 (or pip's boto3) is installed.
const python = process.env.COFFER_TEST_PYTHON_BOTO3 ?? 'python3';
const hasBoto3 = spawnSync(python, ['-c', 'import boto3'], { stdio: 'ignore' }).status === 0;

describe.skipIf(!hasBoto3)('requests signed by boto3', () => {
  it('accepts its uploads, odd keys and queries and presigned URLs, and refuses a wrong secret', async () => {
    const script = join(import.meta.dirname, 'boto3-client.py');
    const { stdout } = await promisify(execFile)(python, [script, endpoint, ACCESS_KEY, SECRET_KEY]);
    const results = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(results).toEqual([
      { name: 'put bytes', ok: true },
      { name: 'put stream', ok: true },
      { name: 'put sha256', ok: true },
      { name: 'put unsigned payload', ok: true },
      { name: 'get odd key', ok: true },
      { name: 'list odd prefix', ok: true },
      { name: 'wrong secret', ok: false, code: 'SignatureDoesNotMatch' },
      { name: 'presigned get', ok: true },
      { name: 'presigned put', ok: true },
    ]);
    const bodies = server.outcomes
      .filter((outcome) => outcome.method === 'PUT')
      .map((outcome) => outcome.body?.toString());
    expect(bodies).toEqual(
      expect.arrayContaining(['hello from boto3', 'x'.repeat(100_000), 'sum me', 'u', 'presigned body']),
    );
  });
});
