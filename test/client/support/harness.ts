import { createHash, randomBytes } from 'node:crypto';
import { S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { type Client, type ClientOptions, createClient } from '@coffer/client';
import { expect } from 'vitest';
import { s3TestSettings, storage } from '../../support/backends.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';
import { settledChecksum } from '../../support/files.ts';
import { type Decision, type HttpProxy, type Seen, startHttpProxy } from './http-proxy.ts';

export const MIB = 1024 * 1024;

const s3 = storage === 's3' ? s3TestSettings() : undefined;

/**
 * The path of the presigned object URLs that clients PUT to and GET from: Coffer's `/objects/…`,
 * or the bucket's on S3 (path-style).
 */
export const OBJECTS = s3
  ? new RegExp(`^/${s3.bucket.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/`)
  : /^\/objects\//;

/** What AWS S3 answers to a presigned URL past its expiry. */
export const EXPIRED_ANSWER = {
  status: 403,
  headers: { 'content-type': 'application/xml' },
  body: '<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message><RequestId>s3req</RequestId></Error>',
} as const;

/**
 * Coffer behind a steerable proxy: API calls and presigned object URLs both pass through it. On S3
 * storage the object URLs are the bucket's: Coffer's S3 endpoint is a second entrance of the proxy,
 * so that the URLs it presigns name that entrance, and the PUTs to them meet the same `intercept`,
 * `seen` and `putDelayMs` as on local storage. Coffer's own calls to S3 (SigV4 in an Authorization
 * header, not in the query) pass that entrance untouched and unrecorded.
 */
export interface Harness {
  coffer: TestCoffer;
  proxy: HttpProxy;
  /** A client of the proxy with fast retries (the project's key unless the options say otherwise). */
  client(project: TestProject, options?: Partial<ClientOptions>): Client;
  /**
   * What makes the store refuse this presigned PUT as expired. On S3: the same request, signed
   * again by the harness as if its URL had expired a minute ago, which S3 itself refuses (403,
   * an XML error). On local storage: EXPIRED_ANSWER, answered by the proxy.
   */
  expired(request: Seen): Promise<Decision>;
  /**
   * Expects the SHA-256 of `bytes` for an uploaded file: in the answer already where the store
   * hashes uploads; on S3 null in the answer, then recorded by the digest job.
   */
  expectChecksum(
    project: TestProject,
    file: { id: string; checksum_sha256: string | null },
    bytes: Uint8Array,
  ): Promise<void>;
  close(): Promise<void>;
}

/** Coffer's own call to S3, as opposed to a request to a URL it presigned. */
const coffersOwn = (request: Seen) =>
  request.headers.authorization !== undefined &&
  !new URL(request.url, 'http://x').searchParams.has('X-Amz-Signature');

export async function startHarness(env: Record<string, string> = {}): Promise<Harness> {
  const proxy = await startHttpProxy();
  const s3Entrance = s3
    ? await proxy.addEntrance(s3.endpoint, { keepHost: true, bypass: coffersOwn })
    : undefined;
  const coffer = await startCoffer({
    COFFER_PUBLIC_URL: proxy.url,
    ...(s3Entrance ? { COFFER_S3_ENDPOINT: s3Entrance } : {}),
    ...env,
  });
  proxy.target = coffer.url;
  // Signs like Coffer (same settings, same endpoint): only the time differs.
  const signer =
    s3 && s3Entrance
      ? new S3Client({
          region: s3.region,
          endpoint: s3Entrance,
          forcePathStyle: true,
          credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
          requestChecksumCalculation: 'WHEN_REQUIRED',
          responseChecksumValidation: 'WHEN_REQUIRED',
        })
      : undefined;

  async function expired(request: Seen): Promise<Decision> {
    if (!s3 || !signer) return EXPIRED_ANSWER;
    const url = new URL(request.url, 'http://x');
    const prefix = `/${s3.bucket}/`;
    const query = url.searchParams;
    if (!url.pathname.startsWith(prefix) || !query.has('uploadId') || !query.has('partNumber'))
      throw new Error(`not a presigned part PUT: ${request.url}`);
    const part = new UploadPartCommand({
      Bucket: s3.bucket,
      Key: decodeURIComponent(url.pathname.slice(prefix.length)),
      UploadId: query.get('uploadId')!,
      PartNumber: Number(query.get('partNumber')),
      ContentLength: Number(request.headers['content-length']),
    });
    const resigned = new URL(
      await getSignedUrl(signer, part, { expiresIn: 1, signingDate: new Date(Date.now() - 60_000) }),
    );
    // Only the time (the date in the credential, and so the signature) differs from Coffer's URL.
    const TIMED = ['X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Expires', 'X-Amz-Signature'];
    const untimed = (target: URL) =>
      `${target.pathname}?${[...target.searchParams].filter(([name]) => !TIMED.includes(name)).join('&')}`;
    if (untimed(resigned) !== untimed(url))
      throw new Error(`signed again otherwise: ${untimed(resigned)} for ${untimed(url)}`);
    return { forwardTo: `${resigned.pathname}${resigned.search}` };
  }

  return {
    coffer,
    proxy,
    client: (project, options = {}) =>
      createClient({
        baseUrl: proxy.url,
        ...(options.token ? {} : { apiKey: project.key }),
        retry: { baseDelayMs: 1, maxDelayMs: 5 },
        ...options,
      }),
    expired,
    async expectChecksum(project, file, bytes) {
      const hashed = coffer.services.store.capabilities.sha256OnUpload;
      expect(file.checksum_sha256).toBe(hashed ? sha256(bytes) : null);
      expect(await settledChecksum(coffer, project, file.id)).toBe(sha256(bytes));
    },
    async close() {
      await coffer.close();
      await proxy.close();
      signer?.destroy();
    },
  };
}

export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Random bytes that cannot be mistaken for another test's. */
export const bytesOf = (size: number) => randomBytes(size);

/** The bytes a download URL serves. */
export async function download(url: string): Promise<Buffer> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`download failed: ${response.status}`);
  return Buffer.from(await response.arrayBuffer());
}

/**
 * The part number of a presigned part PUT (`part=` of Coffer's query, `partNumber=` of S3's),
 * undefined for a whole-object PUT on local storage. On S3 a whole-object URL is itself part 1 of
 * a one-part multipart upload (see src/infra/storage/s3/presigned-urls.ts), so it reads 1.
 */
export function partOf(url: string): number | undefined {
  const query = new URL(url, 'http://x').searchParams;
  const part = query.get('part') ?? query.get('partNumber');
  return part === null ? undefined : Number(part);
}
