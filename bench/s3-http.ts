/** What both sides of the S3 benchmark share: the signed content type, the timeout, and plain HTTP transfers. */
import { request } from 'undici';
import { agent } from './client.ts';

export const CONTENT_TYPE = 'application/octet-stream';
export const TARGET = 0.95;
/** Longest single request: a memstore OSD that is full holds writes forever instead of failing them. */
export const REQUEST_TIMEOUT_MS = 600_000;
/** Coffer's presigned upload URLs sign Content-Type; the SDK baseline signs it too, so both send the same headers. */
export const SIGNED = { expiresIn: 3600, signableHeaders: new Set(['content-type']) };

export const seconds = (from: number, to = performance.now()) => (to - from) / 1000;

/** PUTs `body` to a presigned URL; answers the ETag. */
export async function putBytes(url: string, body: Buffer, contentType?: string): Promise<string> {
  const response = await request(url, {
    method: 'PUT',
    headers: {
      'content-length': String(body.length),
      ...(contentType ? { 'content-type': contentType } : {}),
    },
    body,
    dispatcher: agent,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`PUT: expected 200, got ${response.statusCode} ${text}`);
  const etag = response.headers.etag;
  return typeof etag === 'string' ? etag : '';
}

/** GETs `url` and discards the body, checking its length. */
export async function drain(url: string, size: number): Promise<void> {
  const response = await request(url, {
    dispatcher: agent,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  let received = 0;
  for await (const part of response.body) received += (part as Buffer).length;
  if (response.statusCode !== 200 || received !== size) {
    throw new Error(`GET: status ${response.statusCode}, ${received} of ${size} bytes`);
  }
}
