import { badRequest, type ErrorCode, fileTooLarge } from '../../domain/errors.ts';
import { HttpError } from '../../http/errors.ts';
import { isUnder } from '../../http/mount.ts';
import type { UploadRequest } from '../../modules/ingest/intake.ts';
import { MAX_OBJECT_BYTES } from '../../modules/projects/schemas.ts';

/** Where the endpoint is mounted on the API port. */
export const MOUNT = '/tus';

/** Whether a request is the endpoint's. */
export const underMount = (url: string) => isUnder(MOUNT, url);

/** The one version of the protocol served, and its extensions. */
export const TUS_VERSION = '1.0.0';
export const TUS_EXTENSIONS = 'creation,creation-with-upload,creation-defer-length,termination,expiration';
/** The body type of PATCH (and of a POST carrying the first bytes). */
export const OFFSET_STREAM = 'application/offset+octet-stream';

/** A refusal in tus's own statuses (412, 410, 423, 415…), with Coffer's error body. */
export const tusError = (
  status: number,
  code: ErrorCode,
  message: string,
  headers?: Record<string, string>,
) => new HttpError(status, code, message, undefined, headers);

export const unsupportedVersion = () =>
  tusError(
    412,
    'BAD_REQUEST',
    `This server speaks tus ${TUS_VERSION} only: send Tus-Resumable: ${TUS_VERSION}`,
    {
      'tus-version': TUS_VERSION,
    },
  );
export const offsetMismatch = (offset: number) =>
  new HttpError(409, 'CONFLICT', `Upload-Offset does not match the upload's offset ${offset}`, { offset });
export const uploadGone = (status: string) =>
  new HttpError(410, 'NOT_FOUND', `The upload is ${status}`, { status });
export const uploadLocked = () =>
  tusError(423, 'CONFLICT', 'Another request is writing this upload: send HEAD, then PATCH again');
export const notOffsetStream = () =>
  tusError(415, 'BAD_REQUEST', `The body of a tus request is Content-Type: ${OFFSET_STREAM}`);

/** An Upload-Length past the largest object stored. */
export const pastMaxObject = () => fileTooLarge(MAX_OBJECT_BYTES, 'project', 'Upload-Length');

/**
 * A non-negative whole number from a header; undefined when absent, 400 when malformed. One past the
 * largest safe integer gets `tooLarge()` if given, else 400.
 */
export function headerNumber(
  value: string | string[] | undefined,
  name: string,
  tooLarge?: () => Error,
): number | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value[0]! : value;
  const malformed = () => badRequest(`${name} must be a non-negative integer`, { field: name });
  if (!/^\d+$/.test(text)) throw malformed();
  const number = Number(text);
  if (!Number.isSafeInteger(number)) throw (tooLarge ?? malformed)();
  return number;
}

/** Upload-Length: past what a number holds is past the largest object, 413 as tus wants it. */
export const uploadLengthOf = (value: string | string[] | undefined) =>
  headerNumber(value, 'Upload-Length', pastMaxObject);

/** Padded standard Base64: its alphabet in groups of four, padded with '=' at the end only. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Upload-Metadata: comma-separated `key base64value` pairs (a value may be absent), values as bytes. */
export function parseMetadata(header: string | undefined): Map<string, Buffer> {
  const pairs = new Map<string, Buffer>();
  if (!header) return pairs;
  for (const item of header.split(',')) {
    const [key, value, extra] = item.trim().split(' ');
    if (!key || extra !== undefined) {
      throw badRequest('Upload-Metadata must be comma-separated "key base64value" pairs', {
        field: 'Upload-Metadata',
      });
    }
    // Node decodes anything leniently: a value cut or misspelled would become other text, or none.
    if (value !== undefined && !BASE64.test(value)) {
      throw badRequest(`The value of Upload-Metadata key "${key}" is not Base64`, {
        field: 'Upload-Metadata',
      });
    }
    if (pairs.has(key)) throw badRequest(`Upload-Metadata names ${key} twice`, { field: 'Upload-Metadata' });
    pairs.set(key, Buffer.from(value ?? '', 'base64'));
  }
  return pairs;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The text of a key Coffer reads: UTF-8, refused rather than changed when its bytes are not. */
function textOf(pairs: Map<string, Buffer>, key: string): string | undefined {
  const bytes = pairs.get(key);
  if (bytes === undefined) return undefined;
  try {
    return UTF8.decode(bytes);
  } catch {
    throw badRequest(`The value of Upload-Metadata key "${key}" is not UTF-8 text`, {
      field: 'Upload-Metadata',
    });
  }
}

/**
 * The file an upload declares through its metadata: `filename` (required), `filetype`, `folder_id`,
 * `tags` (comma-separated) and `metadata` (a JSON object); other keys are the client's own and ignored.
 */
export function uploadRequestOf(header: string | undefined): Omit<UploadRequest, 'size_bytes'> {
  const pairs = parseMetadata(header);
  const filename = textOf(pairs, 'filename');
  if (!filename) throw badRequest('Upload-Metadata must carry filename', { field: 'filename' });
  let metadata: unknown;
  const json = textOf(pairs, 'metadata');
  if (json !== undefined) {
    try {
      metadata = JSON.parse(json);
    } catch {
      metadata = undefined;
    }
    if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
      throw badRequest('The metadata key of Upload-Metadata must be a JSON object', { field: 'metadata' });
    }
  }
  const tags = textOf(pairs, 'tags');
  return {
    filename,
    content_type: textOf(pairs, 'filetype') || 'application/octet-stream',
    type_field: 'filetype',
    folder_id: textOf(pairs, 'folder_id') || null,
    tags: tags ? tags.split(',') : undefined,
    metadata: metadata as Record<string, unknown> | undefined,
  };
}
