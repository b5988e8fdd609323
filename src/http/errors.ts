import { DomainError, type ErrorCode } from '../domain/errors.ts';

/** The REST API's status for each code of the catalogue. */
const STATUS_OF: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  UNAUTHENTICATED: 401,
  TOKEN_EXPIRED: 401,
  INSUFFICIENT_SCOPE: 403,
  PERMISSION_DENIED: 403,
  TOKEN_LIMIT_REACHED: 403,
  QUOTA_EXCEEDED: 403,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  webhook_not_found: 404,
  CONFLICT: 409,
  INVALID_STATE: 409,
  LEGAL_HOLD: 409,
  VERSIONING_DISABLED: 409,
  FILE_TOO_LARGE: 413,
  REQUEST_TOO_LARGE: 413,
  HEADERS_TOO_LARGE: 431,
  RANGE_NOT_SATISFIABLE: 416,
  VALIDATION_ERROR: 422,
  invalid_url: 422,
  NOT_AN_IMAGE: 422,
  IMAGE_TOO_LARGE: 422,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  STORE_UNAVAILABLE: 503,
  RENDER_BUSY: 503,
  DATABASE_UNAVAILABLE: 503,
  STORAGE_FULL: 507,
};

/** An error only HTTP raises, with a status of its own or headers the answer must carry. */
export class HttpError extends DomainError {
  readonly status: number;
  readonly headers: Record<string, string> | undefined;

  constructor(
    status: number,
    code: ErrorCode,
    message: string,
    details?: Record<string, unknown>,
    headers?: Record<string, string>,
  ) {
    super(code, message, details);
    this.status = status;
    this.headers = headers;
  }
}

/** The REST API's status for `code`, as the catalogue maps it. */
export const statusOf = (code: ErrorCode): number => STATUS_OF[code];

/** The status the REST API answers `error` with. */
export const httpStatus = (error: DomainError): number =>
  error instanceof HttpError ? error.status : statusOf(error.code);

export const rangeNotSatisfiable = (size: number) =>
  new HttpError(416, 'RANGE_NOT_SATISFIABLE', `The range is outside the object's ${size} bytes`, undefined, {
    'content-range': `bytes */${size}`,
  });

/**
 * Too many requests in the current minute. `what` names whose limit it is ("for this API key"); the
 * headers say when to try again, in the RateLimit-* fields of every counted answer.
 */
export const rateLimited = (what: string, limit: number, retryAfterSeconds: number, limitSource: string) =>
  new HttpError(
    429,
    'RATE_LIMITED',
    `Too many requests ${what}: at most ${limit} a minute; try again in ${retryAfterSeconds} s`,
    { limit, window_seconds: 60, retry_after_seconds: retryAfterSeconds, limit_source: limitSource },
    {
      'retry-after': String(retryAfterSeconds),
      'ratelimit-limit': String(limit),
      'ratelimit-remaining': '0',
      'ratelimit-reset': String(retryAfterSeconds),
    },
  );

/**
 * A 4xx that Fastify raised itself (an unparsable URL, an unsupported method…), keeping its status;
 * any such status but 404 means the request could not be read.
 */
export const fromHttpStatus = (status: number, message: string) =>
  new HttpError(status, status === 404 ? 'NOT_FOUND' : 'BAD_REQUEST', message);
