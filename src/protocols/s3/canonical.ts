import { createHash, createHmac, createSecretKey, type Hash, type Hmac, type KeyObject } from 'node:crypto';
import querystring from 'node:querystring';
import { getCanonicalHeaders, SignatureV4 } from '@smithy/signature-v4';
import { LRUCache } from 'lru-cache';

type Bytes = string | ArrayBuffer | ArrayBufferView;
const toBuffer = (data: Bytes) =>
  typeof data === 'string'
    ? Buffer.from(data)
    : ArrayBuffer.isView(data)
      ? Buffer.from(data.buffer, data.byteOffset, data.byteLength)
      : Buffer.from(data);

/** Node's SHA-256 (HMAC when given a key) in the shape @smithy/signature-v4 expects of a hash. */
export class Sha256 {
  readonly #hash: Hash | Hmac;
  constructor(secret?: Bytes) {
    this.#hash = secret === undefined ? createHash('sha256') : createHmac('sha256', toBuffer(secret));
  }
  update(data: Bytes): void {
    this.#hash.update(toBuffer(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.#hash.digest();
  }
}

type SignableRequest = Parameters<SignatureV4['presign']>[0];
type QueryBag = Record<string, string | string[]>;

/**
 * The query of a request as @smithy/signature-v4 takes it: names and values percent-decoded (`+`
 * stays a plus, as RFC 3986 has it), repeated names as arrays. The library re-encodes them the AWS
 * way (unreserved characters bare, everything else %XX in uppercase) and sorts them.
 */
export function parseQuery(raw: string): QueryBag {
  const query: QueryBag = Object.create(null);
  for (const part of raw.replace(/^\?/, '').split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    // querystring.unescape falls back to a lenient decoder on malformed escapes instead of throwing.
    const name = querystring.unescape(eq === -1 ? part : part.slice(0, eq));
    const value = eq === -1 ? '' : querystring.unescape(part.slice(eq + 1));
    const seen = query[name];
    if (seen === undefined) query[name] = value;
    else if (Array.isArray(seen)) seen.push(value);
    else query[name] = [seen, value];
  }
  return query;
}

/** The first value of a query parameter, its name matched without regard to case. */
export function queryParam(query: QueryBag, name: string): string | string[] | undefined {
  const lower = name.toLowerCase();
  for (const key in query) if (key.toLowerCase() === lower) return query[key];
  return undefined;
}

/** A header's value as one string, repeated fields joined with commas as SigV4 canonicalises them. */
export function headerValue(
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  name: string,
): string | undefined {
  const value = headers[name];
  return value === undefined ? undefined : typeof value === 'string' ? value : value.join(',');
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the test is for bytes outside ASCII
const NON_ASCII = /[^\x00-\x7f]/;

/**
 * Node hands header values over as latin1, one character per byte, while a client signs the UTF-8
 * text it sent: reading the bytes back as UTF-8 gives the signer the client's text. Bytes that are
 * not UTF-8 are left as they are (and will not match, as on S3).
 */
function asSent(value: string): string {
  if (!NON_ASCII.test(value)) return value;
  const bytes = Buffer.from(value, 'latin1');
  if (bytes.toString('latin1') !== value) return value;
  const text = bytes.toString('utf8');
  return Buffer.from(text, 'utf8').equals(bytes) ? text : value;
}

/** The canonical headers of the signed names: lowercase, values trimmed and inner runs of spaces folded. */
export function canonicalHeaders(
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  signed: readonly string[],
): Record<string, string> {
  const bag: Record<string, string> = {};
  for (const name of signed) bag[name] = asSent(headerValue(headers, name) ?? '');
  // The names passed as signable keep even those the library never signs itself (user-agent, expect…).
  return getCanonicalHeaders({ headers: bag } as unknown as SignableRequest, undefined, new Set(signed));
}

/** Derived signing keys kept: one per credential, day and region in use (a few hundred bytes each). */
const SIGNING_KEYS_KEPT = 10_000;

/**
 * Signing keys by credential, day and region: deriving one costs four HMACs, and a client signs every
 * request of a day with the same. Keyed by the secret as the credential lookup answered it, so a
 * rotated secret derives anew and a revoked credential, which the lookup no longer answers, is never
 * asked for. Kept as KeyObjects: an HMAC under a Buffer imports the key anew each time, which cost
 * several times the HMAC of a request's string to sign.
 */
const signingKeys = new LRUCache<string, KeyObject>({ max: SIGNING_KEYS_KEPT });

/** The derived key (date, region, s3, aws4_request) that SigV4 signatures, chunks' too, are made with. */
export function signingKeyOf(
  accessKeyId: string,
  secretAccessKey: string,
  shortDate: string,
  region: string,
): KeyObject {
  const id = `${accessKeyId}\n${secretAccessKey}\n${shortDate}\n${region}`;
  let key = signingKeys.get(id);
  if (!key) {
    let bytes = Buffer.from(`AWS4${secretAccessKey}`);
    for (const part of [shortDate, region, 's3', 'aws4_request'])
      bytes = createHmac('sha256', bytes).update(part).digest();
    key = createSecretKey(bytes);
    signingKeys.set(id, key);
  }
  return key;
}

/**
 * @smithy/signature-v4's signer, opened up to build the canonical request and string to sign of a
 * request someone else signed. S3 signs the path as sent (`uriEscapePath: false`: no second
 * encoding, no normalisation). One serves every request of its region: the signature is made here
 * with the caller's signing key.
 */
export class RequestVerifier extends SignatureV4 {
  constructor(region: string) {
    super({
      // Never used: the signing key comes with each request.
      credentials: { accessKeyId: '', secretAccessKey: '' },
      region,
      service: 's3',
      sha256: Sha256,
      uriEscapePath: false,
      applyChecksum: false,
    });
  }

  /** The signature the client should have sent for this request. */
  async expectedSignature(input: {
    method: string;
    path: string;
    query: QueryBag;
    headers: Record<string, string>;
    payloadHash: string;
    amzDate: string;
    scope: string;
    signingKey: KeyObject;
  }): Promise<string> {
    const request = {
      method: input.method,
      protocol: 'http:',
      hostname: '',
      path: input.path,
      query: input.query,
      headers: input.headers,
    } as SignableRequest;
    const canonical = this.createCanonicalRequest(request, input.headers, input.payloadHash);
    const stringToSign = await this.createStringToSign(
      input.amzDate,
      input.scope,
      canonical,
      'AWS4-HMAC-SHA256',
    );
    return createHmac('sha256', input.signingKey).update(stringToSign).digest('hex');
  }
}

const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;

/** Parses an ISO 8601 basic timestamp (`20130524T000000Z`), or undefined if it is not one. */
export function parseAmzDate(value: string): Date | undefined {
  const m = AMZ_DATE.exec(value);
  if (!m) return undefined;
  const date = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
  return formatAmzDate(date) === value ? date : undefined;
}

export const formatAmzDate = (date: Date) =>
  date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
