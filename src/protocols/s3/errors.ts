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

/**
 * A request S3 would refuse, as S3 words it: `code` and `status` go into the error document, and the
 * `details` (Region, ServerTime, …) become extra elements of it. Messages never carry a secret, a
 * signature or a session token, so they can be logged and returned as they are.
 */
export class SigV4Error extends Error {
  readonly code: SigV4ErrorCode;
  readonly status: number;
  readonly details: Readonly<Record<string, string>>;

  constructor(code: SigV4ErrorCode, message?: string, details: Record<string, string> = {}) {
    super(message ?? DEFAULT_MESSAGE[code]);
    this.name = 'SigV4Error';
    this.code = code;
    this.status = STATUS[code];
    this.details = details;
  }
}
