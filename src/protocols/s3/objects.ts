import type { Readable } from 'node:stream';
import { isDomainError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import { parseRange } from '../../http/range.ts';
import { isLocalStore, sliceStream } from '../../infra/storage/local/store.ts';
import type { ByteRange, ObjectStore } from '../../infra/storage/object-store.ts';
import type { AuditContext } from '../../modules/audit/schemas.ts';
import { findByKey } from '../../modules/files/key-repo.ts';
import type { FileRow } from '../../modules/files/repo.ts';
import { visibleFile } from '../../modules/files/service.ts';
import type { Services } from '../../services.ts';
import {
  accessDenied,
  invalidArgument,
  invalidObjectState,
  invalidRequest,
  noSuchKey,
  preconditionFailed,
  S3Error,
} from './errors.ts';
import { EMPTY_ETAG, etagOf } from './etag.ts';
import { placeOf } from './keys.ts';

/** `x-amz-meta-*` headers: a file's metadata values that are strings (others have no header form). */
export function metaHeaders(metadata: Record<string, unknown>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(metadata)) {
    if (typeof value === 'string' && /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name) && !/[\r\n]/.test(value)) {
      headers[`x-amz-meta-${name.toLowerCase()}`] = value;
    }
  }
  return headers;
}

const META = 'x-amz-meta-';

/**
 * The metadata an S3 request sets, names lowercased as S3 keeps them: its `x-amz-meta-*` headers,
 * and on a presigned URL its `x-amz-meta-*` query parameters too (SDK presigners move those headers
 * into the URL, whose whole query the signature covers); a header wins over a parameter.
 */
export function metadataOf(
  headers: Record<string, string | string[] | undefined>,
  presignedQuery?: URLSearchParams,
): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const [name, value] of presignedQuery ?? []) {
    const lower = name.toLowerCase();
    if (lower.startsWith(META)) metadata[lower.slice(META.length)] = value;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(META) && value !== undefined) {
      metadata[name.slice(META.length)] = Array.isArray(value) ? value.join(',') : value;
    }
  }
  return metadata;
}

/** The conditional headers of a read (RFC 9110 §13 as S3 applies them): 304 or 412 when they fail. */
export function checkConditions(
  headers: Record<string, string | string[] | undefined>,
  etag: string,
  modified: Date,
  forCopy = false,
): void {
  const notModified = () =>
    forCopy ? preconditionFailed() : new S3Error(304, 'NotModified', 'Not Modified');
  const header = (name: string) =>
    typeof headers[name] === 'string' ? (headers[name] as string) : undefined;
  const matches = (list: string) =>
    list.split(',').some((tag) => tag.trim() === '*' || tag.trim().replace(/^W\//, '') === etag);
  const seconds = Math.floor(modified.getTime() / 1000);
  const since = (value: string) => Math.floor(Date.parse(value) / 1000);
  const ifMatch = header('if-match');
  const ifNoneMatch = header('if-none-match');
  const ifModifiedSince = header('if-modified-since');
  const ifUnmodifiedSince = header('if-unmodified-since');
  if (ifMatch !== undefined && !matches(ifMatch)) throw preconditionFailed();
  if (ifMatch === undefined && ifUnmodifiedSince !== undefined && seconds > since(ifUnmodifiedSince)) {
    throw preconditionFailed();
  }
  if (ifNoneMatch !== undefined && matches(ifNoneMatch)) throw notModified();
  if (ifNoneMatch === undefined && ifModifiedSince !== undefined && seconds <= since(ifModifiedSince)) {
    throw notModified();
  }
}

/** The services an S3 object operation works through. */
export type ObjectServices = Pick<Services, 'db' | 'store' | 'ingest' | 'files' | 'folders'>;

/** The newest file S3 shows at `key`, when the caller may see it; `atKey`: that file, already read. */
export async function shownAt(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  key: string,
  atKey?: { file: FileRow | undefined },
): Promise<FileRow | undefined> {
  const file = atKey ? atKey.file : await findByKey(services.db, caller.project.id, key);
  return file && isVisible(caller, file) ? file : undefined;
}

/** The newest file S3 shows at `key` that the caller may see; NoSuchKey otherwise. */
export async function fileAt(
  services: ObjectServices,
  caller: Caller,
  key: string,
  atKey?: { file: FileRow | undefined },
): Promise<FileRow> {
  const file = await shownAt(services, caller, key, atKey);
  if (!file) throw noSuchKey();
  return file;
}

/** A ready file's bytes for GetObject; a file still being checked answers InvalidObjectState. */
export function requireReadable(file: FileRow): void {
  if (file.status !== 'ready') throw invalidObjectState(file.status);
}

/**
 * What GetObject sends of the object `key`: on the local store, a small object already read with its
 * sidecar's line as that one buffer (no stream to set up and drain for a few bytes), any other as a
 * stream of its slices from the same read of its sidecar; the store's stream elsewhere.
 */
export async function objectBody(
  store: ObjectStore,
  key: string,
  range: ByteRange | undefined,
): Promise<Buffer | Readable> {
  if (!isLocalStore(store)) return store.read(key, range);
  const slices = await store.slicesOf(key, range);
  const [only] = slices;
  return slices.length === 1 && only!.bytes ? only!.bytes : sliceStream(slices);
}

/** The byte range of a GetObject (`Range: bytes=…`), undefined for the whole object. */
export function rangeOf(header: string | undefined, size: number) {
  try {
    return parseRange(header, size);
  } catch {
    throw new S3Error(416, 'InvalidRange', 'The requested range is not satisfiable', {
      headers: { 'content-range': `bytes */${size}` },
    });
  }
}

/** Writes `body` at `key`: a new file, new content of the file there, or (a key ending in /) a folder. */
export async function putObject(
  services: ObjectServices,
  caller: Caller,
  key: string,
  request: { size: number; contentType: string; metadata: Record<string, string>; body: Readable },
): Promise<{ etag: string; file?: FileRow; versionId?: string }> {
  const place = placeOf(key);
  if (place.kind === 'folder') {
    if (request.size !== 0) throw invalidRequest('A key ending in / is a folder: it takes no bytes');
    request.body.resume();
    await services.folders.markPath(caller.project.id, place.folderPath);
    return { etag: EMPTY_ETAG };
  }
  const existing = await replaceableAt(services, caller, key);
  const metadata = Object.keys(request.metadata).length > 0 ? request.metadata : undefined;
  if (existing) {
    const outcome = await services.ingest.writeContent(
      caller,
      existing,
      { content_type: request.contentType, size_bytes: request.size, metadata },
      request.body,
    );
    return { etag: etagOf(outcome.file), file: outcome.file, versionId: outcome.version_id };
  }
  const file = await services.ingest.writeFile(
    caller,
    {
      filename: place.filename,
      content_type: request.contentType,
      size_bytes: request.size,
      folder_id: await folderFor(services, caller, place.folderPath),
      exact_folder: true,
      metadata,
    },
    request.body,
  );
  return { etag: etagOf(file), file };
}

/**
 * The file whose content a write at `key` replaces (a new version where versioning is on): the ready
 * file S3 shows there, when the caller may see it; otherwise the write makes a new file.
 */
export async function replaceableAt(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  key: string,
): Promise<FileRow | undefined> {
  const existing = await shownAt(services, caller, key);
  return existing?.status === 'ready' ? existing : undefined;
}

/**
 * The folder a key puts its file in: created when missing, as S3 has no folders to make first; an
 * upload token may only use the folder it is bound to (it creates none), so its key must name that one.
 */
export async function folderFor(
  services: Pick<ObjectServices, 'folders'>,
  caller: Caller,
  path: string | null,
): Promise<string | null> {
  if (path === null) return null;
  if (caller.principal.kind === 'upload_token') {
    const folder = await services.folders.findByPath(caller.project.id, path);
    if (!folder) throw accessDenied('The upload token stores files in another folder');
    return folder.id;
  }
  return (await services.folders.ensurePath(caller.project.id, path, { field: 'key', implied: true })).id;
}

const isVisible = (caller: Caller, file: FileRow) => {
  try {
    visibleFile(caller, file);
    return true;
  } catch (error) {
    if (isDomainError(error)) return false;
    throw error;
  }
};

/** Deletes the file at `key` (or the folder marker `key/`); a key with nothing is no error, as in S3. */
export async function deleteObject(
  services: ObjectServices,
  caller: Caller,
  key: string,
  audit: AuditContext,
): Promise<void> {
  const place = placeOf(key);
  if (place.kind === 'folder') {
    await services.folders.unmarkPath(caller.project.id, place.folderPath);
    return;
  }
  const file = await shownAt(services, caller, key);
  if (!file) return;
  try {
    await services.files.remove(caller, file.id, audit);
  } catch (error) {
    if (isDomainError(error, 'LEGAL_HOLD')) throw accessDenied('The object is under a legal hold');
    if (isDomainError(error, 'NOT_FOUND')) return;
    throw error;
  }
}

/** The size a PutObject or UploadPart declares: the decoded length of an aws-chunked body, else Content-Length. */
export function declaredSize(
  headers: Record<string, string | string[] | undefined>,
  decoded?: number,
): number {
  if (decoded !== undefined) return decoded;
  const length = headers['content-length'];
  if (typeof length !== 'string') {
    throw new S3Error(411, 'MissingContentLength', 'You must provide the Content-Length HTTP header.');
  }
  if (!/^\d+$/.test(length)) throw invalidArgument('Content-Length must be a whole number of bytes');
  return Number(length);
}

/** `x-amz-copy-source`: `[/]bucket/key[?versionId=…]`, percent-encoded. */
export function copySourceOf(header: string): { bucket: string; key: string; versionId?: string } {
  const [path = '', query = ''] = header.split('?');
  const decoded = (() => {
    try {
      return decodeURIComponent(path.replace(/^\//, ''));
    } catch {
      throw invalidArgument('Invalid copy source encoding');
    }
  })();
  const slash = decoded.indexOf('/');
  if (slash <= 0 || slash === decoded.length - 1) throw invalidArgument('Invalid copy source object key');
  const versionId = new URLSearchParams(query).get('versionId') ?? undefined;
  return { bucket: decoded.slice(0, slash), key: decoded.slice(slash + 1), versionId };
}

/**
 * CopyObject within the bucket: the source's bytes streamed from the store into a new file (or new
 * content) at `key`, with the source's type and metadata (COPY) or the request's (REPLACE).
 */
export async function copyObject(
  services: ObjectServices,
  caller: Caller,
  sourceKey: string,
  key: string,
  request: {
    replace: boolean;
    contentType: string | undefined;
    metadata: Record<string, string>;
    headers: Record<string, string | string[] | undefined>;
  },
) {
  const source = await fileAt(services, caller, sourceKey);
  requireReadable(source);
  const conditions = Object.fromEntries(
    Object.entries(request.headers)
      .filter(([name]) => name.startsWith('x-amz-copy-source-if-'))
      .map(([name, value]) => [name.replace('x-amz-copy-source-', ''), value]),
  );
  checkConditions(conditions, etagOf(source), source.updated_at, true);
  const metadata = request.replace ? request.metadata : stringValues(source.metadata);
  return putObject(services, caller, key, {
    size: source.size_bytes,
    contentType: request.replace ? (request.contentType ?? source.content_type) : source.content_type,
    metadata,
    body: await services.store.read(source.storage_key),
  });
}

const stringValues = (metadata: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(metadata).filter(([, value]) => typeof value === 'string')) as Record<
    string,
    string
  >;
