/**
 * AWS Signature Version 4 as S3 checks it: `Authorization: AWS4-HMAC-SHA256 …` headers and presigned
 * (query-string) URLs, then the body: a literal SHA-256, UNSIGNED-PAYLOAD, or aws-chunked streaming
 * with signed chunks or a trailing checksum (see `verifiedBody`).
 */
import {
  canonicalHeaders,
  formatAmzDate,
  headerValue,
  parseAmzDate,
  parseQuery,
  queryParam,
  RequestVerifier,
  signingKeyOf,
} from './canonical.ts';
import { SigningKey, sameSignature } from './chunked.ts';
import { SigV4Error } from './errors.ts';
import { bodyDigestsOf, classifyPayload, payloadHashOf } from './payload.ts';
import type { Authenticated, AuthenticateOptions, CredentialLookup, Payload, S3Request } from './types.ts';

export { VerifiedBody, type VerifiedBodyOptions, verifiedBody } from './body.ts';
export { CHECKSUM_ALGORITHMS, type ChecksumAlgorithm } from './checksums.ts';
export type { SigningKey } from './chunked.ts';
export { SigV4Error, type SigV4ErrorCode } from './errors.ts';
export type { Authenticated, AuthenticateOptions, CredentialLookup, Payload, S3Request } from './types.ts';

const ALGORITHM = 'AWS4-HMAC-SHA256';
/** S3's cap on X-Amz-Expires: seven days. */
const MAX_EXPIRES = 604_800;

/** The verifier of each region served (one, in practice). */
const verifiers = new Map<string, RequestVerifier>();
function verifierOf(region: string): RequestVerifier {
  let verifier = verifiers.get(region);
  if (!verifier) {
    verifier = new RequestVerifier(region);
    verifiers.set(region, verifier);
  }
  return verifier;
}

/** What the Authorization header or the X-Amz-* parameters say, before anything is checked against it. */
interface Claim {
  presigned: boolean;
  accessKeyId: string;
  scope: { date: string; region: string; service: string; terminal: string };
  signedHeaders: string[];
  signature: string;
  amzDate: string;
  date: Date;
  expires: number | undefined;
  sessionToken: string | undefined;
}

/**
 * Checks a request's SigV4 signature. Resolves to who signed it and what its body must be checked
 * against (pass that to `verifiedBody`); throws a `SigV4Error` with S3's code when S3 would refuse
 * the request, including `AccessDenied` for a request that carries no signature at all. Errors the
 * `lookup` throws are passed on as they are.
 */
export async function authenticate(
  request: S3Request,
  lookup: CredentialLookup,
  options: AuthenticateOptions,
): Promise<Authenticated> {
  const now = options.now ?? new Date();
  const maxSkewMs = (options.maxSkewSeconds ?? 900) * 1000;
  const query = parseQuery(request.query);
  const claim = readClaim(request, query);
  checkScope(claim, options.region);
  checkTime(claim, now, maxSkewMs);
  checkSignedHeaders(request, claim);
  const payloadHash = payloadHashOf(request, query, claim.presigned);
  const payload = classifyPayload(payloadHash, request);

  const credentials = await lookup(claim.accessKeyId, claim.sessionToken);
  if (!credentials)
    throw new SigV4Error(claim.sessionToken === undefined ? 'InvalidAccessKeyId' : 'InvalidToken');
  const scope = `${claim.scope.date}/${options.region}/s3/aws4_request`;
  const signingKey = signingKeyOf(
    claim.accessKeyId,
    credentials.secretAccessKey,
    claim.scope.date,
    options.region,
  );
  const expected = await verifierOf(options.region).expectedSignature({
    method: request.method,
    path: request.path || '/',
    query,
    headers: canonicalHeaders(request.headers, claim.signedHeaders),
    payloadHash,
    amzDate: claim.amzDate,
    scope,
    signingKey,
  });
  if (!sameSignature(expected, claim.signature)) throw new SigV4Error('SignatureDoesNotMatch');

  let finalPayload: Payload;
  if (payload.kind === 'chunked-signed') {
    finalPayload = {
      kind: 'chunked-signed',
      seedSignature: claim.signature,
      signingKey: new SigningKey(signingKey, claim.amzDate, scope),
      decodedLength: payload.decodedLength,
      trailer: payload.trailer,
      signedTrailer: payload.signedTrailer,
    };
  } else finalPayload = payload;

  const contentLength = headerValue(request.headers, 'content-length');
  return {
    accessKeyId: claim.accessKeyId,
    ...(claim.sessionToken === undefined ? {} : { sessionToken: claim.sessionToken }),
    presigned: claim.presigned,
    signedHeaders: claim.signedHeaders,
    payload: finalPayload,
    bodyDigests: bodyDigestsOf(request, query, claim.presigned),
    contentLength:
      contentLength !== undefined && /^\d+$/.test(contentLength) ? Number(contentLength) : undefined,
  };
}

/** The 400 error for a malformed signature: S3 names it after where the signature was. */
function malformed(presigned: boolean, message: string, details?: Record<string, string>): SigV4Error {
  return presigned
    ? new SigV4Error('AuthorizationQueryParametersError', message, details)
    : new SigV4Error(
        'AuthorizationHeaderMalformed',
        `The authorization header is malformed; ${message}`,
        details,
      );
}

function readClaim(request: S3Request, query: Record<string, string | string[]>): Claim {
  const authorization = headerValue(request.headers, 'authorization');
  const presigned = queryParam(query, 'X-Amz-Algorithm') !== undefined;
  const sigV2Query =
    queryParam(query, 'Signature') !== undefined && queryParam(query, 'AWSAccessKeyId') !== undefined;
  if (authorization !== undefined && (presigned || sigV2Query))
    throw new SigV4Error(
      'InvalidArgument',
      'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified',
    );
  if (authorization !== undefined) return readAuthorizationHeader(request, authorization);
  if (presigned) return readPresignedQuery(request, query);
  if (sigV2Query) throw unsupportedMechanism();
  throw new SigV4Error('AccessDenied');
}

const unsupportedMechanism = () =>
  new SigV4Error(
    'InvalidRequest',
    'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.',
  );

function readAuthorizationHeader(request: S3Request, authorization: string): Claim {
  const space = authorization.trim().indexOf(' ');
  const algorithm = space === -1 ? authorization.trim() : authorization.trim().slice(0, space);
  if (algorithm !== ALGORITHM) throw unsupportedMechanism();
  const fields = new Map<string, string>();
  for (const part of authorization
    .trim()
    .slice(space + 1)
    .split(',')) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim();
    if (name === '') continue;
    if (eq === -1 || fields.has(name)) throw malformed(false, `the component "${name}" is malformed.`);
    fields.set(name, part.slice(eq + 1).trim());
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (credential === undefined || signedHeaders === undefined || signature === undefined)
    throw malformed(
      false,
      'the authorization header requires three components: Credential, SignedHeaders, and Signature.',
    );
  const rawDate = headerValue(request.headers, 'x-amz-date');
  const fallback = headerValue(request.headers, 'date');
  const date =
    rawDate !== undefined
      ? parseAmzDate(rawDate.trim())
      : fallback !== undefined && !Number.isNaN(Date.parse(fallback))
        ? new Date(Date.parse(fallback))
        : undefined;
  if (!date)
    throw new SigV4Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
  return {
    presigned: false,
    ...parseCredential(false, credential),
    signedHeaders: parseSignedHeaders(false, signedHeaders),
    signature,
    amzDate: formatAmzDate(date),
    date,
    expires: undefined,
    sessionToken: headerValue(request.headers, 'x-amz-security-token'),
  };
}

function readPresignedQuery(request: S3Request, query: Record<string, string | string[]>): Claim {
  const param = (name: string) => {
    const value = queryParam(query, name);
    if (Array.isArray(value)) throw malformed(true, `The ${name} parameter is repeated.`);
    return value;
  };
  const algorithm = param('X-Amz-Algorithm');
  const credential = param('X-Amz-Credential');
  const rawDate = param('X-Amz-Date');
  const rawExpires = param('X-Amz-Expires');
  const signedHeaders = param('X-Amz-SignedHeaders');
  const signature = param('X-Amz-Signature');
  if (algorithm !== ALGORITHM)
    throw malformed(true, 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"', {
      'X-Amz-Algorithm': algorithm ?? '',
    });
  if (
    credential === undefined ||
    rawDate === undefined ||
    rawExpires === undefined ||
    signedHeaders === undefined ||
    signature === undefined
  )
    throw malformed(
      true,
      'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.',
    );
  const date = parseAmzDate(rawDate);
  if (!date) throw malformed(true, `X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`);
  if (!/^\d{1,9}$/.test(rawExpires)) throw malformed(true, 'X-Amz-Expires should be a number');
  const expires = Number(rawExpires);
  if (expires > MAX_EXPIRES)
    throw malformed(true, `X-Amz-Expires must be less than a week (in seconds) that is ${MAX_EXPIRES}`);
  return {
    presigned: true,
    ...parseCredential(true, credential),
    signedHeaders: parseSignedHeaders(true, signedHeaders),
    signature,
    amzDate: rawDate,
    date,
    expires,
    sessionToken: param('X-Amz-Security-Token') ?? headerValue(request.headers, 'x-amz-security-token'),
  };
}

function parseCredential(presigned: boolean, credential: string): Pick<Claim, 'accessKeyId' | 'scope'> {
  // The access key is everything before the last four parts; those are the scope.
  const parts = credential.split('/');
  if (parts.length < 5 || parts.slice(0, -4).join('/') === '')
    throw malformed(
      presigned,
      `${presigned ? 'Error parsing the X-Amz-Credential parameter; the' : 'the'} Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`,
    );
  const [date, region, service, terminal] = parts.slice(-4) as [string, string, string, string];
  return { accessKeyId: parts.slice(0, -4).join('/'), scope: { date, region, service, terminal } };
}

function parseSignedHeaders(presigned: boolean, value: string): string[] {
  const names = value.split(';').map((name) => name.trim().toLowerCase());
  if (names.some((name) => !/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) || new Set(names).size !== names.length)
    throw malformed(presigned, `${presigned ? 'X-Amz-SignedHeaders' : 'SignedHeaders'} is malformed.`);
  return names;
}

function checkScope(claim: Claim, region: string): void {
  const { date, region: claimed, service, terminal } = claim.scope;
  const lead = claim.presigned ? 'Error parsing the X-Amz-Credential parameter; ' : '';
  if (date !== claim.amzDate.slice(0, 8))
    throw malformed(
      claim.presigned,
      `${lead}Invalid credential date "${date}". This date is not the same as X-Amz-Date: "${claim.amzDate.slice(0, 8)}".`,
    );
  if (claimed !== region)
    throw malformed(claim.presigned, `${lead}the region '${claimed}' is wrong; expecting '${region}'`, {
      Region: region,
    });
  if (service !== 's3')
    throw malformed(claim.presigned, `${lead}incorrect service '${service}'. This endpoint belongs to 's3'.`);
  if (terminal !== 'aws4_request')
    throw malformed(
      claim.presigned,
      `${lead}incorrect terminal '${terminal}'. This endpoint uses 'aws4_request'.`,
    );
}

function checkTime(claim: Claim, now: Date, maxSkewMs: number): void {
  const serverTime = now.toISOString();
  if (claim.presigned) {
    if (claim.date.getTime() - now.getTime() > maxSkewMs)
      throw new SigV4Error('AccessDenied', 'Request is not valid yet', { ServerTime: serverTime });
    const expiresAt = new Date(claim.date.getTime() + claim.expires! * 1000);
    if (now.getTime() > expiresAt.getTime())
      throw new SigV4Error('AccessDenied', 'Request has expired', {
        'X-Amz-Expires': String(claim.expires),
        Expires: expiresAt.toISOString(),
        ServerTime: serverTime,
      });
    return;
  }
  if (Math.abs(claim.date.getTime() - now.getTime()) > maxSkewMs)
    throw new SigV4Error('RequestTimeTooSkewed', undefined, {
      RequestTime: claim.amzDate,
      ServerTime: serverTime,
      MaxAllowedSkewMilliseconds: String(maxSkewMs),
    });
}

function checkSignedHeaders(request: S3Request, claim: Claim): void {
  if (!claim.signedHeaders.includes('host'))
    throw malformed(
      claim.presigned,
      `${claim.presigned ? 'X-Amz-SignedHeaders' : 'SignedHeaders'} must include host.`,
    );
  const signed = new Set(claim.signedHeaders);
  for (const name of claim.signedHeaders)
    if (request.headers[name] === undefined)
      throw new SigV4Error('AccessDenied', `The signed header ${name} is missing from the request.`);
  // As on S3, every x-amz-* header must be covered by the signature.
  const unsigned = Object.keys(request.headers).filter(
    (name) => name.startsWith('x-amz-') && !signed.has(name) && request.headers[name] !== undefined,
  );
  if (unsigned.length > 0)
    throw new SigV4Error('AccessDenied', 'There were headers present in the request which were not signed', {
      HeadersNotSigned: unsigned.join(', '),
    });
}
