import { type Static, Type } from 'typebox';
import type { ErrorCode } from '../domain/errors.ts';
import { statusOf } from './errors.ts';
import { ErrorBody, Ref } from './schemas.ts';

/** What any route may answer: an unreadable request, a failure of Coffer or of its database. */
const GENERIC: ErrorCode[] = ['BAD_REQUEST', 'INTERNAL', 'DATABASE_UNAVAILABLE'];
/** What a route that checks its caller may answer: no or a wrong credential, no scope, too many requests. */
const CALLER: ErrorCode[] = [
  'UNAUTHENTICATED',
  'TOKEN_EXPIRED',
  'INSUFFICIENT_SCOPE',
  'PERMISSION_DENIED',
  'RATE_LIMITED',
];
/** What a route taking a JSON body may answer beyond: a body too large, a value breaking a rule. */
export const BODY_ERRORS: ErrorCode[] = ['REQUEST_TOO_LARGE', 'VALIDATION_ERROR'];

// The description lists the codes a status stands for (one status may have several), comma-separated.
const errorResponse = (codes: ErrorCode[]) =>
  Type.Unsafe<Static<typeof ErrorBody>>({
    ...Ref(ErrorBody),
    description: codes.join(', '),
  });

/** The error responses answering `codes`, by status (each the status the catalogue gives it). */
function errorResponses(codes: ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = statusOf(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return Object.fromEntries(
    [...byStatus].sort(([a], [b]) => a - b).map(([status, listed]) => [status, errorResponse(listed)]),
  ) as Record<number, ReturnType<typeof errorResponse>>;
}

// Any request whose line and headers pass the HTTP parser's limit is refused before a route runs.
const HEAD_TOO_LARGE = errorResponses(['HEADERS_TOO_LARGE']);

/**
 * The error responses of an authenticated route: the generic ones, the caller's, and `codes`, the
 * ones its own work may answer.
 */
export const errors = (...codes: ErrorCode[]) => ({
  ...errorResponses([...GENERIC, ...CALLER, ...codes]),
  ...HEAD_TOO_LARGE,
});

/** The error responses of a public route that touches nothing: an unreadable request, a failure. */
export const publicErrors = () => ({ ...errorResponses(['BAD_REQUEST', 'INTERNAL']), ...HEAD_TOO_LARGE });
