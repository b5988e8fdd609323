import { hmacHex, safeEqual } from '../../../lib/secrets.ts';
import { StoreError } from '../object-store.ts';

/**
 * What a presigned URL allows, as signed: a download, a whole-object upload or one part of a
 * multipart upload (of exactly `size` bytes when the part URL was signed for a size).
 */
export type SignedUrl =
  | { kind: 'get'; key: string; expires: number; contentType: string; filename: string }
  | { kind: 'put'; key: string; expires: number; size: number; contentType: string }
  | { kind: 'part'; key: string; expires: number; uploadId: string; partNumber: number; size?: number };

export type UploadUrl = Extract<SignedUrl, { kind: 'put' | 'part' }>;

/** The expiry of a URL as signed: whole seconds since the epoch, rounded up. */
export function unixSeconds(date: Date): number {
  const seconds = Math.ceil(date.getTime() / 1000);
  if (!Number.isSafeInteger(seconds) || seconds < 0)
    throw new StoreError('InvalidArgument', 'Invalid expiry');
  return seconds;
}

/** The signed fields of a URL, in a canonical order; JSON keeps them unambiguous whatever they contain. */
function canonical(url: SignedUrl): string {
  switch (url.kind) {
    case 'get':
      return JSON.stringify(['GET', url.kind, url.key, url.expires, url.contentType, url.filename]);
    case 'put':
      return JSON.stringify(['PUT', url.kind, url.key, url.expires, url.size, url.contentType]);
    case 'part': {
      const fields = ['PUT', url.kind, url.key, url.expires, url.uploadId, url.partNumber];
      // An unsized part URL keeps the form it had before sizes were signed (URLs already handed out stay valid).
      return JSON.stringify(url.size === undefined ? fields : [...fields, url.size]);
    }
  }
}

/** The query parameters that carry a URL's signed fields (`sig` is added alongside). */
function queryOf(url: SignedUrl): Record<string, string> {
  const exp = String(url.expires);
  switch (url.kind) {
    case 'get':
      return { exp, type: url.contentType, name: url.filename };
    case 'put':
      return { exp, size: String(url.size), type: url.contentType };
    case 'part': {
      const query = { upload: url.uploadId, part: String(url.partNumber), exp };
      return url.size === undefined ? query : { ...query, size: String(url.size) };
    }
  }
}

/** Reads the signed fields back from a request's query; undefined when any is missing or malformed. */
function fromQuery(method: 'GET' | 'PUT', key: string, query: unknown): SignedUrl | undefined {
  const params = (query ?? {}) as Record<string, unknown>;
  const text = (name: string) => (typeof params[name] === 'string' ? params[name] : undefined);
  const integer = (name: string) => {
    const value = text(name);
    return value !== undefined && /^\d{1,15}$/.test(value) ? Number(value) : undefined;
  };
  const expires = integer('exp');
  if (expires === undefined) return undefined;
  if (method === 'GET') {
    const contentType = text('type');
    const filename = text('name');
    return contentType === undefined || filename === undefined
      ? undefined
      : { kind: 'get', key, expires, contentType, filename };
  }
  const uploadId = text('upload');
  if (uploadId !== undefined) {
    const partNumber = integer('part');
    if (partNumber === undefined) return undefined;
    if (params.size === undefined) return { kind: 'part', key, expires, uploadId, partNumber };
    const size = integer('size');
    return size === undefined ? undefined : { kind: 'part', key, expires, uploadId, partNumber, size };
  }
  const size = integer('size');
  const contentType = text('type');
  return size === undefined || contentType === undefined
    ? undefined
    : { kind: 'put', key, expires, size, contentType };
}

/** The query string of the URL allowing `url`: its fields and their signature. */
export function signedQuery(secret: string, url: SignedUrl): string {
  return new URLSearchParams({ ...queryOf(url), sig: hmacHex(secret, canonical(url)) }).toString();
}

/**
 * Checks the query of a presigned URL requested with `method` on `key` (HEAD counts as GET) and
 * answers what it allows; Forbidden when it is tampered with, made for another method or expired.
 */
export function verifySignedUrl(
  secret: string,
  method: 'GET' | 'PUT',
  key: string,
  query: unknown,
): SignedUrl {
  const url = fromQuery(method, key, query);
  const sig = (query as Record<string, unknown> | undefined)?.sig;
  if (!url || typeof sig !== 'string' || !safeEqual(hmacHex(secret, canonical(url)), sig)) {
    throw new StoreError('Forbidden', 'The URL signature is invalid');
  }
  if (Date.now() >= url.expires * 1000) throw new StoreError('Forbidden', 'The URL has expired');
  return url;
}
