import type { FastifyRequest } from 'fastify';
import type { DomainError, ErrorCode } from '../../domain/errors.ts';
import { cutByClient, toDomainError } from '../../http/error-handler.ts';

/**
 * An S3 error, as S3 answers it: its code (`NoSuchKey`…), HTTP status and message; `details` become
 * extra elements of the error document (Region, ServerTime…), `headers` extra response headers.
 * Messages never carry a secret, a signature or a session token.
 */
export class S3Error extends Error {
  readonly code: string;
  readonly status: number;
  readonly details: Readonly<Record<string, string>>;
  readonly headers: Record<string, string> | undefined;

  constructor(
    status: number,
    code: string,
    message: string,
    options: { details?: Record<string, string>; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'S3Error';
    this.status = status;
    this.code = code;
    this.details = options.details ?? {};
    this.headers = options.headers;
  }
}

/** The S3 error codes the SigV4 verifier raises, with the HTTP status S3 answers each with. */
const STATUS = {
  AccessDenied: 403,
  InvalidAccessKeyId: 403,
  SignatureDoesNotMatch: 403,
  RequestTimeTooSkewed: 403,
  AuthorizationQueryParametersError: 400,
  AuthorizationHeaderMalformed: 400,
  ExpiredToken: 400,
  InvalidToken: 400,
  MissingSecurityHeader: 400,
  XAmzContentSHA256Mismatch: 400,
  BadDigest: 400,
  InvalidDigest: 400,
  IncompleteBody: 400,
  InvalidArgument: 400,
  InvalidRequest: 400,
} as const;

export type SigV4ErrorCode = keyof typeof STATUS;

const DEFAULT_MESSAGE: Record<SigV4ErrorCode, string> = {
  AccessDenied: 'Access Denied',
  InvalidAccessKeyId: 'The AWS Access Key Id you provided does not exist in our records.',
  SignatureDoesNotMatch:
    'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
  RequestTimeTooSkewed: 'The difference between the request time and the current time is too large.',
  AuthorizationQueryParametersError: 'Error parsing the query-string authentication parameters.',
  AuthorizationHeaderMalformed: 'The authorization header is malformed.',
  ExpiredToken: 'The provided token has expired.',
  InvalidToken: 'The provided token is malformed or otherwise invalid.',
  MissingSecurityHeader: 'Your request is missing a required header.',
  XAmzContentSHA256Mismatch: "The provided 'x-amz-content-sha256' header does not match what was computed.",
  BadDigest: 'The Content-MD5 or checksum value that you specified did not match what the server received.',
  InvalidDigest: 'The Content-MD5 you specified was invalid.',
  IncompleteBody: 'You did not provide the number of bytes specified by the Content-Length HTTP header.',
  InvalidArgument: 'Invalid Argument',
  InvalidRequest: 'Invalid Request',
};

/** A request the SigV4 verifier refuses, with the status S3 answers its code with. */
export class SigV4Error extends S3Error {
  declare readonly code: SigV4ErrorCode;

  constructor(code: SigV4ErrorCode, message?: string, details: Record<string, string> = {}) {
    super(STATUS[code], code, message ?? DEFAULT_MESSAGE[code], { details });
    this.name = 'SigV4Error';
  }
}

/**
 * The refusals of what a request named that is not there, each naming it in its own element as S3
 * does (`<BucketName>`, `<Key>`, `<UploadId>`, `<VersionId>`); one raised without its name is given
 * the request's at the edge (see routes.ts).
 */
export const noSuchBucket = (bucket?: string) =>
  new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist', {
    details: bucket === undefined ? {} : { BucketName: bucket },
  });
export const invalidBucketName = (name: string) =>
  new S3Error(400, 'InvalidBucketName', 'The specified bucket is not valid.', {
    details: { BucketName: name },
  });
export const noSuchKey = (key?: string) =>
  new S3Error(404, 'NoSuchKey', 'The specified key does not exist.', {
    details: key === undefined ? {} : { Key: key },
  });
export const noSuchUpload = (uploadId?: string) =>
  new S3Error(404, 'NoSuchUpload', 'The specified multipart upload does not exist.', {
    details: uploadId === undefined ? {} : { UploadId: uploadId },
  });
export const noSuchVersion = (key?: string, versionId?: string) =>
  new S3Error(404, 'NoSuchVersion', 'The specified version does not exist.', {
    details: {
      ...(key === undefined ? {} : { Key: key }),
      ...(versionId === undefined ? {} : { VersionId: versionId }),
    },
  });
/** A URL whose path cannot be percent-decoded. */
export const invalidUri = () => new S3Error(400, 'InvalidURI', "Couldn't parse the specified URI.");
export const accessDenied = (message = 'Access Denied') => new S3Error(403, 'AccessDenied', message);
export const invalidArgument = (message: string, details?: Record<string, string>) =>
  new S3Error(400, 'InvalidArgument', message, { details });
export const invalidRequest = (message: string) => new S3Error(400, 'InvalidRequest', message);
export const copyToItself = () =>
  invalidRequest(
    "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
  );
export const malformedXml = () =>
  new S3Error(
    400,
    'MalformedXML',
    'The XML you provided was not well-formed or did not validate against our published schema',
  );
export const notImplemented = (what: string) =>
  new S3Error(501, 'NotImplemented', `${what} is not implemented by Coffer`);
/** A condition that did not hold, named as S3 names it (`If-Match`, `x-amz-copy-source-If-Match`…). */
export const preconditionFailed = (condition: string) =>
  new S3Error(412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', {
    details: { Condition: condition },
  });
export const conditionalRequestConflict = () =>
  new S3Error(
    409,
    'ConditionalRequestConflict',
    'A conflicting operation occurred at this key while the conditional write ran: read the key again and retry',
  );
export const invalidPartNumber = (requested: number, partsCount?: number) =>
  new S3Error(416, 'InvalidPartNumber', 'The requested partnumber is not satisfiable', {
    details: {
      PartNumberRequested: String(requested),
      ...(partsCount === undefined ? {} : { ActualPartCount: String(partsCount) }),
    },
  });
/** A PUT (of an object or a part) past `max` bytes, as S3 words it. */
export const entityTooLarge = (size: number, max: number) =>
  new S3Error(400, 'EntityTooLarge', 'Your proposed upload exceeds the maximum allowed size', {
    details: { ProposedSize: String(size), MaxSizeAllowed: String(max) },
  });
export const invalidObjectState = (status: string) =>
  new S3Error(403, 'InvalidObjectState', `The object is ${status}, not ready: it cannot be read yet`);

/** Coffer's refusals in S3's words (the contract's S3 section). */
const FROM_DOMAIN: Record<ErrorCode, [number, string]> = {
  BAD_REQUEST: [400, 'InvalidArgument'],
  UNAUTHENTICATED: [403, 'AccessDenied'],
  TOKEN_EXPIRED: [400, 'ExpiredToken'],
  INSUFFICIENT_SCOPE: [403, 'AccessDenied'],
  PERMISSION_DENIED: [403, 'AccessDenied'],
  TOKEN_LIMIT_REACHED: [403, 'AccessDenied'],
  QUOTA_EXCEEDED: [403, 'QuotaExceeded'],
  FORBIDDEN: [403, 'AccessDenied'],
  NOT_FOUND: [404, 'NoSuchKey'],
  webhook_not_found: [404, 'NoSuchKey'],
  CONFLICT: [409, 'OperationAborted'],
  INVALID_STATE: [403, 'InvalidObjectState'],
  LEGAL_HOLD: [403, 'AccessDenied'],
  VERSIONING_DISABLED: [400, 'InvalidArgument'],
  FILE_TOO_LARGE: [400, 'EntityTooLarge'],
  REQUEST_TOO_LARGE: [400, 'EntityTooLarge'],
  HEADERS_TOO_LARGE: [400, 'RequestHeaderSectionTooLarge'],
  RANGE_NOT_SATISFIABLE: [416, 'InvalidRange'],
  VALIDATION_ERROR: [400, 'InvalidArgument'],
  invalid_url: [400, 'InvalidArgument'],
  // S3 renders nothing; listed for completeness of the catalogue.
  NOT_AN_IMAGE: [400, 'InvalidArgument'],
  IMAGE_TOO_LARGE: [400, 'InvalidArgument'],
  RENDER_BUSY: [503, 'SlowDown'],
  RATE_LIMITED: [503, 'SlowDown'],
  INTERNAL: [500, 'InternalError'],
  STORE_UNAVAILABLE: [503, 'ServiceUnavailable'],
  DATABASE_UNAVAILABLE: [503, 'ServiceUnavailable'],
  STORAGE_FULL: [507, 'InsufficientStorage'],
};

export function fromDomainError(error: DomainError): S3Error {
  // A type the token or the project does not take is refused as access, naming the type.
  if (error.code === 'VALIDATION_ERROR' && error.details?.field === 'content_type') {
    return accessDenied(error.message);
  }
  const [status, code] = FROM_DOMAIN[error.code];
  const retryAfter = error.details?.retry_after_seconds;
  const headers = typeof retryAfter === 'number' ? { 'retry-after': String(retryAfter) } : undefined;
  return new S3Error(status, code, error.message, { headers });
}

/** Anything thrown, as S3 words it; the unexpected ones logged, their cause never answered. */
export function asS3Error(request: FastifyRequest, error: unknown): S3Error {
  if (error instanceof S3Error) return error;
  const domain = toDomainError(cutByClient(request, error));
  const mapped = fromDomainError(domain);
  if (mapped.status >= 500) request.log.error({ err: error }, 's3 request failed');
  return mapped;
}
