import { normalizeMimeType } from '../../lib/mime.ts';
import type { HttpHeaders } from '../../modules/files/repo.ts';
import { invalidArgument, notImplemented, S3Error } from './errors.ts';

/** The standard headers S3 stores with an object as a write sends them, and answers on its reads. */
const STORED_HEADERS = [
  'cache-control',
  'content-disposition',
  'content-encoding',
  'content-language',
  'expires',
];

/** The longest value Coffer keeps of a stored header or takes of a `response-*` parameter. */
const MAX_HEADER_VALUE_BYTES = 2048;

/**
 * A header value from a request, checked before it is kept or sent: one no header can hold (a line
 * break, a control character), or past MAX_HEADER_VALUE_BYTES, is InvalidArgument, where Node would
 * refuse it mid-answer, after the object's Content-Length.
 */
function headerValue(name: string, value: string): string {
  if (/[^\t\x20-\x7e\x80-\xff]/.test(value)) {
    throw invalidArgument(`${name} holds a character a header cannot carry`);
  }
  if (Buffer.byteLength(value, 'latin1') > MAX_HEADER_VALUE_BYTES) {
    throw invalidArgument(`${name} is longer than ${MAX_HEADER_VALUE_BYTES} bytes`);
  }
  return value;
}

/**
 * The standard headers a PutObject, CreateMultipartUpload or CopyObject (REPLACE) stores with the
 * object: STORED_HEADERS as sent, but for `aws-chunked` in Content-Encoding, which frames the
 * request's body and is not the object's encoding (S3 drops it too); and the Content-Type as sent
 * when it is more than the file's type (its parameters, its case), which S3 answers as sent.
 */
export function storedHeadersOf(headers: Record<string, string | string[] | undefined>): HttpHeaders {
  const stored: HttpHeaders = {};
  const type = typeof headers['content-type'] === 'string' ? headers['content-type'].trim() : '';
  // A type Coffer cannot read is refused with the write: nothing to keep of it.
  const bare = normalizeMimeType(type);
  if (bare && bare !== type) stored['content-type'] = headerValue('content-type', type);
  for (const name of STORED_HEADERS) {
    const sent = headers[name];
    let value = Array.isArray(sent) ? sent.join(', ') : sent;
    if (name === 'content-encoding' && value !== undefined) {
      value = value
        .split(',')
        .map((coding) => coding.trim())
        .filter((coding) => coding !== '' && coding.toLowerCase() !== 'aws-chunked')
        .join(',');
    }
    if (value) stored[name] = headerValue(name, value);
  }
  return stored;
}

/** The headers a GetObject's `response-*` query parameters override. */
const OVERRIDABLE = [
  'content-type',
  'content-disposition',
  'content-encoding',
  'content-language',
  'cache-control',
  'expires',
];

/**
 * The headers a GetObject's `response-*` parameters set over the object's own, each checked (see
 * headerValue) before anything is sent.
 */
export function responseOverrides(query: URLSearchParams): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (const name of OVERRIDABLE) {
    const value = query.get(`response-${name}`);
    if (value !== null) overrides[name] = headerValue(`response-${name}`, value);
  }
  return overrides;
}

/** Prefixes of a write's request for what Coffer does not do to an object, with what to call it. */
const UNSERVED_WRITES: [prefix: string, what: string][] = [
  ['x-amz-server-side-encryption', 'Server-side encryption'],
  ['x-amz-object-lock-', 'Object lock'],
];

/** Such headers with the one value that asks for nothing (any case): no bucket key, no legal hold. */
const HARMLESS_WRITES = new Map([
  ['x-amz-server-side-encryption-bucket-key-enabled', 'false'],
  ['x-amz-object-lock-legal-hold', 'off'],
]);

/**
 * The canned ACLs a bucket whose ACLs are disabled (S3 Object Ownership "bucket owner enforced")
 * takes: those granting full control to the bucket's owner alone. Every credential writes as the
 * bucket's owner here, so `private` (full control to the writer) is one of them, as S3 takes it
 * from the owner's account.
 */
const OWNER_ONLY_ACLS = ['bucket-owner-full-control', 'private'];

/**
 * Whether `grantees`, an `x-amz-grant-full-control` value (`id="…"`, `emailAddress="…"` or `uri="…"`,
 * comma-separated), names the bucket's owner (`ownerId`, its canonical id) alone: the grant form of
 * `bucket-owner-full-control`, which S3 takes where ACLs are disabled.
 */
const grantsOwnerAlone = (grantees: string, ownerId: string) =>
  grantees.split(',').every((grantee) => /^id=("?)(.*)\1$/.exec(grantee.trim())?.[2] === ownerId);

/** The one storage class Coffer keeps objects in. */
const STORAGE_CLASS = 'STANDARD';

const aclsNotSupported = () =>
  new S3Error(400, 'AccessControlListNotSupported', 'The bucket does not allow ACLs');
const invalidStorageClass = () =>
  new S3Error(400, 'InvalidStorageClass', 'The storage class you specified is not valid.');

/**
 * Refuses a PutObject, CopyObject or CreateMultipartUpload asking, by header or, on a presigned URL,
 * by query parameter, for what Coffer does not do to an object, before a byte is stored: an ACL other
 * than OWNER_ONLY_ACLS or any `x-amz-grant-*` but full control to the bucket's owner (`ownerId`) alone
 * (400 AccessControlListNotSupported, as S3 answers for a bucket whose ACLs are disabled); a storage class other than STANDARD (400 InvalidStorageClass, as
 * for a class the bucket does not offer); server-side encryption (S3's keys, KMS or the client's own)
 * or an object lock (501 NotImplemented, as ignoring it would store the object otherwise than asked),
 * but for one of HARMLESS_WRITES, which asks for nothing.
 */
export function refuseUnservedWrites(
  headers: Record<string, string | string[] | undefined>,
  ownerId: string,
  presignedQuery?: URLSearchParams,
): void {
  const sent = [
    ...Object.entries(headers),
    ...[...(presignedQuery ?? [])].map(([name, value]) => [name.toLowerCase(), value] as const),
  ];
  for (const [name, value] of sent) {
    if (name === 'x-amz-acl' && !(typeof value === 'string' && OWNER_ONLY_ACLS.includes(value.trim())))
      throw aclsNotSupported();
    if (
      name.startsWith('x-amz-grant-') &&
      !(name === 'x-amz-grant-full-control' && typeof value === 'string' && grantsOwnerAlone(value, ownerId))
    )
      throw aclsNotSupported();
    if (name === 'x-amz-storage-class' && !(typeof value === 'string' && value.trim() === STORAGE_CLASS))
      throw invalidStorageClass();
  }
  const asked = sent.filter(
    ([name, value]) => typeof value !== 'string' || HARMLESS_WRITES.get(name) !== value.trim().toLowerCase(),
  );
  for (const [prefix, what] of UNSERVED_WRITES) {
    if (asked.some(([name]) => name.startsWith(prefix))) throw notImplemented(what);
  }
}

/** `x-amz-meta-*` headers: a file's metadata values that are strings (others have no header form). */
export function metaHeaders(metadata: Record<string, unknown>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(metadata)) {
    if (typeof value === 'string' && /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name) && !/[\r\n]/.test(value)) {
      headers[`x-amz-meta-${name.toLowerCase()}`] = value;
    }
  }
  return headers;
}

const META = 'x-amz-meta-';

/**
 * The metadata an S3 request sets, names lowercased as S3 keeps them: its `x-amz-meta-*` headers,
 * and on a presigned URL its `x-amz-meta-*` query parameters too (SDK presigners move those headers
 * into the URL, whose whole query the signature covers); a header wins over a parameter.
 */
export function metadataOf(
  headers: Record<string, string | string[] | undefined>,
  presignedQuery?: URLSearchParams,
): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const [name, value] of presignedQuery ?? []) {
    const lower = name.toLowerCase();
    if (lower.startsWith(META)) metadata[lower.slice(META.length)] = value;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(META) && value !== undefined) {
      metadata[name.slice(META.length)] = Array.isArray(value) ? value.join(',') : value;
    }
  }
  return metadata;
}
