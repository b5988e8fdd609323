/** An error the API answers with: the contract's error body is rendered from these fields. */
export class AppError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    status: number,
    code: string,
    message: string,
    details?: Record<string, unknown>,
    headers?: Record<string, string>,
  ) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.headers = headers;
  }
}

type Details = Record<string, unknown>;

export const badRequest = (message: string, details?: Details) =>
  new AppError(400, 'BAD_REQUEST', message, details);
export const unauthenticated = (message = 'A valid API key or upload token is required') =>
  new AppError(401, 'UNAUTHENTICATED', message);
export const tokenExpired = () => new AppError(401, 'TOKEN_EXPIRED', 'The upload token has expired');
export const insufficientScope = (scope: string) =>
  new AppError(403, 'INSUFFICIENT_SCOPE', `This credential lacks the scope ${scope}`, {
    required_scope: scope,
  });
export const permissionDenied = (message = 'The caller IP address is not in the project allowlist') =>
  new AppError(403, 'PERMISSION_DENIED', message);
export const tokenLimitReached = (maxFiles: number) =>
  new AppError(403, 'TOKEN_LIMIT_REACHED', `The upload token has already been used for ${maxFiles} files`, {
    max_files: maxFiles,
  });
export const forbidden = (message: string) => new AppError(403, 'FORBIDDEN', message);
export const notFound = (what = 'Resource') => new AppError(404, 'NOT_FOUND', `${what} not found`);
export const conflict = (message: string, details?: Details) =>
  new AppError(409, 'CONFLICT', message, details);
export const quarantined = () =>
  new AppError(409, 'CONFLICT', 'The file is quarantined after a virus detection; only DELETE is allowed');
export const invalidState = (message: string, details?: Details) =>
  new AppError(409, 'INVALID_STATE', message, details);
export const legalHold = () =>
  new AppError(409, 'LEGAL_HOLD', 'The file is under a legal hold and cannot be deleted');
export const versioningDisabled = () =>
  new AppError(409, 'VERSIONING_DISABLED', 'Versioning is not enabled for this project');
export const fileTooLarge = (limit: number, source: 'project' | 'token', field = 'size_bytes') =>
  new AppError(413, 'FILE_TOO_LARGE', `The file exceeds the ${source} limit of ${limit} bytes`, {
    field,
    max_size_bytes: limit,
    limit_source: source,
  });
export const requestTooLarge = (limit: number) =>
  new AppError(413, 'REQUEST_TOO_LARGE', `The request body exceeds ${limit} bytes`, { max_bytes: limit });
export const validationError = (message: string, details?: Details) =>
  new AppError(422, 'VALIDATION_ERROR', message, details);
export const webhookNotFound = () =>
  new AppError(404, 'webhook_not_found', 'Webhook not found in this project');
export const invalidUrl = (message: string) => new AppError(422, 'invalid_url', message, { field: 'url' });
