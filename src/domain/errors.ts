/**
 * The error catalogue: every code Coffer answers (the spec's, spelled as it spells them, and the
 * contract's), in order of status. The OpenAPI document's Error schema lists them, so that a client
 * generated from it gets one union to switch on; an error is built by a factory below, never by hand.
 */
export const ERROR_CODES = [
  'BAD_REQUEST',
  'UNAUTHENTICATED',
  'TOKEN_EXPIRED',
  'INSUFFICIENT_SCOPE',
  'PERMISSION_DENIED',
  'TOKEN_LIMIT_REACHED',
  'QUOTA_EXCEEDED',
  'FORBIDDEN',
  'NOT_FOUND',
  'webhook_not_found',
  'CONFLICT',
  'INVALID_STATE',
  'LEGAL_HOLD',
  'VERSIONING_DISABLED',
  'FILE_TOO_LARGE',
  'REQUEST_TOO_LARGE',
  'HEADERS_TOO_LARGE',
  'RANGE_NOT_SATISFIABLE',
  'VALIDATION_ERROR',
  'invalid_url',
  'NOT_AN_IMAGE',
  'IMAGE_TOO_LARGE',
  'RATE_LIMITED',
  'INTERNAL',
  'STORE_UNAVAILABLE',
  'RENDER_BUSY',
  'DATABASE_UNAVAILABLE',
  'STORAGE_FULL',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

type Details = Record<string, unknown>;

/**
 * What a service refuses, in the domain's terms: a code from the catalogue, a message for people,
 * and details naming the field or limit. It says nothing of a protocol: each edge (the REST API,
 * later S3 and tus) maps the code to its own status and body.
 */
export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly details: Details | undefined;

  constructor(code: ErrorCode, message: string, details?: Details) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.details = details;
  }
}

export const isDomainError = (error: unknown, code?: ErrorCode): error is DomainError =>
  error instanceof DomainError && (code === undefined || error.code === code);

// 400: the request cannot be read
export const badRequest = (message: string, details?: Details) =>
  new DomainError('BAD_REQUEST', message, details);
export const invalidJson = () => badRequest('The request body is not valid JSON');
export const notJson = () =>
  badRequest('The request body must be JSON, sent with Content-Type: application/json');
/** A value PostgreSQL refused (a NUL in text, a number out of range) that slipped past the checks. */
export const unreadableValue = () =>
  badRequest('The request holds a value that cannot be stored or compared');

// 401, 403: who may do what
export const unauthenticated = (message = 'A valid API key or upload token is required') =>
  new DomainError('UNAUTHENTICATED', message);
export const tokenExpired = () => new DomainError('TOKEN_EXPIRED', 'The upload token has expired');
export const insufficientScope = (scope: string) =>
  new DomainError('INSUFFICIENT_SCOPE', `This credential lacks the scope ${scope}`, {
    required_scope: scope,
  });
export const permissionDenied = (message = 'The caller IP address is not in the project allowlist') =>
  new DomainError('PERMISSION_DENIED', message);
export const tokenLimitReached = (maxFiles: number) =>
  new DomainError('TOKEN_LIMIT_REACHED', `The upload token has already been used for ${maxFiles} files`, {
    max_files: maxFiles,
  });
/**
 * An upload that would take the project past one of its quotas: `setting` names it (max_storage_bytes
 * or max_files); `used` is what the project held or had reserved before, `requested` what the upload asked for.
 */
export const quotaExceeded = (
  setting: 'max_storage_bytes' | 'max_files',
  quota: number,
  used: number,
  requested: number,
) =>
  new DomainError(
    'QUOTA_EXCEEDED',
    setting === 'max_files'
      ? `The project holds ${used} of its ${quota} files (max_files): delete files to upload more`
      : `The upload of ${requested} bytes would exceed the project's ${quota} bytes (max_storage_bytes): ${used} are used or reserved`,
    { quota, used, requested },
  );
/** A project setting that only the operator sets, sent with another credential. */
export const adminOnlySetting = (field: string) =>
  new DomainError('INSUFFICIENT_SCOPE', `${field} can be changed with the admin key only`, {
    field,
    required_scope: 'admin',
  });
/** A credential of a kind the operation is not for (temporary S3 credentials of the admin key). */
export const wrongCredentialKind = (message: string, accepted: string[]) =>
  new DomainError('INSUFFICIENT_SCOPE', message, { accepted_credentials: accepted });
/** A presigned object URL refused (tampered with, expired, or used for another request). */
export const forbidden = (message: string, details?: Details) =>
  new DomainError('FORBIDDEN', message, details);

// 404
export const notFound = (what = 'Resource') => new DomainError('NOT_FOUND', `${what} not found`);
/** An object or multipart upload the object store does not hold, in the store's words. */
export const objectNotFound = (message: string, details?: Details) =>
  new DomainError('NOT_FOUND', message, details);
export const noRoute = (method: string, path: string) =>
  new DomainError('NOT_FOUND', `No route for ${method} ${path}`);
export const webhookNotFound = () =>
  new DomainError('webhook_not_found', 'Webhook not found in this project');

// 409
export const conflict = (message: string, details?: Details) => new DomainError('CONFLICT', message, details);
export const quarantined = () =>
  conflict('The file is quarantined after a virus detection; only DELETE is allowed');
/** A row this request refers to was deleted by a concurrent one after it was checked. */
export const removedMeanwhile = () =>
  conflict('A record this request refers to was removed meanwhile: try again');
/** PostgreSQL aborted the transaction (deadlock, serialization): nothing changed, a retry may pass. */
export const concurrentChange = () => conflict('The request crossed a concurrent change: try again');
/** Confirmed new content that a newer write to its file, committed first, overtook: it is not kept. */
export const supersededContent = (versionId: string) =>
  conflict('A newer content of the file was committed meanwhile: this one is not kept', {
    version_id: versionId,
  });
export const invalidState = (message: string, details?: Details) =>
  new DomainError('INVALID_STATE', message, details);
export const legalHold = () =>
  new DomainError('LEGAL_HOLD', 'The file is under a legal hold and cannot be deleted');
export const versioningDisabled = () =>
  new DomainError('VERSIONING_DISABLED', 'Versioning is not enabled for this project');

// 413, 416: sizes
/** A file past its limit: the project's, the upload token's, or the length its (tus) upload declared. */
export const fileTooLarge = (limit: number, source: 'project' | 'token' | 'upload', field = 'size_bytes') =>
  new DomainError(
    'FILE_TOO_LARGE',
    source === 'upload'
      ? `The bytes sent exceed the upload's length of ${limit} bytes`
      : `The file exceeds the ${source} limit of ${limit} bytes`,
    { field, max_size_bytes: limit, limit_source: source },
  );
export const requestTooLarge = (limit: number) =>
  new DomainError('REQUEST_TOO_LARGE', `The request body exceeds ${limit} bytes`, { max_bytes: limit });
/** A JSON body over the server's limit, refused before it was read. */
export const bodyTooLarge = () => new DomainError('REQUEST_TOO_LARGE', 'The request body is too large');
/** A request body cut before its end (its connection dropped): the client's failure, answered to nobody. */
export const uploadInterrupted = () => badRequest('The upload was interrupted');
/** More bytes than the object store takes, in the store's words. */
export const objectTooLarge = (message: string, details?: Details) =>
  new DomainError('REQUEST_TOO_LARGE', message, details);
/** A part size that would let a multipart upload store more than its parts may hold in all. */
export const partsTooLarge = (wouldStore: number, declared: number, limit: number, granted: number) =>
  new DomainError(
    'REQUEST_TOO_LARGE',
    `With this part the upload could store ${wouldStore} bytes, more than twice the ${declared} it declared`,
    { max_bytes: limit, granted_bytes: granted },
  );
/** A byte range the object store refused, in the store's words. */
export const invalidRange = (message: string, details?: Details) =>
  new DomainError('RANGE_NOT_SATISFIABLE', message, details);

// 422: well-formed values that break a rule
export const validationError = (message: string, details?: Details) =>
  new DomainError('VALIDATION_ERROR', message, details);
export const invalidUrl = (message: string) => new DomainError('invalid_url', message, { field: 'url' });
/** A file to render that is not a raster image the server decodes (SVG included, or truncated). */
export const notAnImage = (message: string, details?: Details) =>
  new DomainError('NOT_AN_IMAGE', message, details);
/** A source past the pixel or byte bound, or whose render ran past its deadline. */
export const imageTooLarge = (message: string, details?: Details) =>
  new DomainError('IMAGE_TOO_LARGE', message, details);

// 5xx
export const internalError = () => new DomainError('INTERNAL', 'An internal error occurred');
/** The object store did not answer or failed; why is logged, never answered (it may name the store). */
export const storeUnavailable = () =>
  new DomainError('STORE_UNAVAILABLE', 'The object store is unavailable: try again');
/**
 * The database did not answer or dropped the connection (why is logged): what the request changed was
 * not confirmed, and it may be sent again.
 */
export const databaseUnavailable = () =>
  new DomainError('DATABASE_UNAVAILABLE', 'The database is unavailable: try again');
/** The object store has no space left for the bytes: nothing was kept, the same URL may be retried later. */
export const storageFull = () =>
  new DomainError(
    'STORAGE_FULL',
    'The object store has no space left for these bytes: nothing was stored; try again once space is freed',
  );
