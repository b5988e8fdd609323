/** Codes the SDK gives to failures that have no answer of the server behind them. */
export type ClientErrorCode =
  | 'NETWORK_ERROR'
  | 'ABORTED'
  | 'INVALID_INPUT'
  | 'TOKEN_REFRESH_FAILED'
  | 'MISSING_ETAG'
  | 'INVALID_RESPONSE'
  | 'HTTP_ERROR';

export interface CofferErrorInit {
  status: number;
  code: string;
  message: string;
  details?: Record<string, unknown> | undefined;
  requestId?: string | undefined;
  /** How long the server asked to wait before trying again (Retry-After), in milliseconds. */
  retryAfterMs?: number | undefined;
  cause?: unknown;
}

/**
 * Every failure of the SDK. From the server: its status and the contract's error body
 * (`code`, `message`, `details`, `request_id`). Without an answer: status 0 and a ClientErrorCode.
 */
export class CofferError extends Error {
  override readonly name = 'CofferError';
  /** HTTP status; 0 when no answer came (network failure, abort, bad input). */
  readonly status: number;
  /** The contract's code (NOT_FOUND, TOKEN_EXPIRED, …), the store's (S3 `<Code>`), or a ClientErrorCode. */
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  readonly requestId: string | undefined;
  /** How long the server asked to wait before trying again (429 and 503 with Retry-After), in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(init: CofferErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
  }
}

export const isCofferError = (error: unknown, code?: string): error is CofferError =>
  error instanceof CofferError && (code === undefined || error.code === code);

export function networkError(cause: unknown): CofferError {
  const reason = cause instanceof Error && cause.message ? `: ${cause.message}` : '';
  return new CofferError({ status: 0, code: 'NETWORK_ERROR', message: `Network failure${reason}`, cause });
}

export function abortedError(signal: AbortSignal | undefined): CofferError {
  return new CofferError({
    status: 0,
    code: 'ABORTED',
    message: 'The operation was aborted',
    cause: signal?.reason,
  });
}

export const invalidInput = (message: string, details?: Record<string, unknown>) =>
  new CofferError({ status: 0, code: 'INVALID_INPUT', message, details });

const XML_FIELD = (name: string) => new RegExp(`<${name}>([^<]*)</${name}>`);

/**
 * The error of a failed answer: Coffer's JSON error body, an S3-compatible store's XML error,
 * or, for anything else, HTTP_ERROR with the status.
 */
export function errorFromAnswer(
  status: number,
  text: string,
  requestIdHeader?: string | null,
  retryAfterHeader?: string | null,
): CofferError {
  const requestId = requestIdHeader ?? undefined;
  let retryAfterMs = retryAfterOf(retryAfterHeader);
  try {
    const { error } = JSON.parse(text) as { error?: Partial<CofferErrorInit> & { request_id?: string } };
    if (error && typeof error.code === 'string') {
      const seconds = error.details?.retry_after_seconds;
      if (retryAfterMs === undefined && typeof seconds === 'number') retryAfterMs = seconds * 1000;
      return new CofferError({
        status,
        code: error.code,
        message: typeof error.message === 'string' ? error.message : error.code,
        details: error.details,
        requestId: error.request_id ?? requestId,
        retryAfterMs,
      });
    }
  } catch {
    // not JSON: an object store's answer
  }
  const code = XML_FIELD('Code').exec(text)?.[1];
  if (code) {
    // Some stores (radosgw) answer an empty <Message/>: the code then says what went wrong.
    const message = XML_FIELD('Message').exec(text)?.[1] || `${code} (HTTP ${status})`;
    const xmlRequestId = XML_FIELD('RequestId').exec(text)?.[1];
    return new CofferError({ status, code, message, requestId: xmlRequestId ?? requestId, retryAfterMs });
  }
  return new CofferError({
    status,
    code: 'HTTP_ERROR',
    message: `HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ''}`,
    requestId,
    retryAfterMs,
  });
}

/** A Retry-After header (seconds, or an HTTP date) in milliseconds from now. */
function retryAfterOf(header: string | null | undefined): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
