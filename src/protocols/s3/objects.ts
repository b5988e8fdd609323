import type { Readable } from 'node:stream';
import { isDomainError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import { parseRange } from '../../http/range.ts';
import type { Queryable } from '../../infra/db.ts';
import { isLocalStore, type Slice } from '../../infra/storage/local/store.ts';
import {
  type ByteRange,
  isStoreError,
  MAX_PART_SIZE,
  type ObjectPart,
  type ObjectStore,
} from '../../infra/storage/object-store.ts';
import { anyEtag, listsEtag } from '../../lib/etag.ts';
import type { AuditContext } from '../../modules/audit/schemas.ts';
import { findByKey, lockKey } from '../../modules/files/key-repo.ts';
import type { FileRow, HttpHeaders } from '../../modules/files/repo.ts';
import { visibleFile } from '../../modules/files/service.ts';
import { hasContentInScan } from '../../modules/ingest/content-repo.ts';
import type { WriteGuard } from '../../modules/ingest/intake.ts';
import { findVersion, firstVersionId, newestVersionId } from '../../modules/versions/repo.ts';
import type { Services } from '../../services.ts';
import { requireScope } from './call.ts';
import {
  accessDenied,
  conditionalRequestConflict,
  copyToItself,
  entityTooLarge,
  invalidArgument,
  invalidObjectState,
  invalidPartNumber,
  invalidRequest,
  noSuchBucket,
  noSuchKey,
  noSuchVersion,
  notImplemented,
  preconditionFailed,
  S3Error,
} from './errors.ts';
import { EMPTY_ETAG, etagOf } from './etag.ts';
import { placeIfAny, placeOf } from './keys.ts';

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

/**
 * The conditional headers of a read (RFC 9110 §13 as S3 applies them): 304 or 412 when they fail. A 304
 * carries the validators a 200 would, and its Cache-Control and Expires (RFC 9110 §15.4.5), so caches
 * can refresh what they hold.
 */
export function checkConditions(
  headers: Record<string, string | string[] | undefined>,
  {
    etag,
    modified,
    versionId,
    headers: stored = {},
  }: { etag: string; modified: Date; versionId?: string; headers?: HttpHeaders },
  forCopy = false,
): void {
  const freshness = Object.entries(stored).filter(([name]) => name === 'cache-control' || name === 'expires');
  const validators = {
    etag,
    'last-modified': modified.toUTCString(),
    ...(versionId ? { 'x-amz-version-id': versionId } : {}),
    ...Object.fromEntries(freshness),
  };
  const notModified = () =>
    forCopy ? preconditionFailed() : new S3Error(304, 'NotModified', 'Not Modified', { headers: validators });
  const header = (name: string) =>
    typeof headers[name] === 'string' ? (headers[name] as string) : undefined;
  const matches = (list: string, comparison?: 'strong') => listsEtag(list, etag, comparison);
  const seconds = Math.floor(modified.getTime() / 1000);
  const since = (value: string) => Math.floor(Date.parse(value) / 1000);
  const ifMatch = header('if-match');
  const ifNoneMatch = header('if-none-match');
  const ifModifiedSince = header('if-modified-since');
  const ifUnmodifiedSince = header('if-unmodified-since');
  if (ifMatch !== undefined && !matches(ifMatch, 'strong')) throw preconditionFailed();
  if (ifMatch === undefined && ifUnmodifiedSince !== undefined && seconds > since(ifUnmodifiedSince)) {
    throw preconditionFailed();
  }
  if (ifNoneMatch !== undefined && matches(ifNoneMatch)) throw notModified();
  if (ifNoneMatch === undefined && ifModifiedSince !== undefined && seconds <= since(ifModifiedSince)) {
    throw notModified();
  }
}

/** S3's conditional writes: `If-None-Match: *` (no object at the key) and `If-Match` (the object's ETag). */
export interface WriteCondition {
  ifNoneMatch: boolean;
  ifMatch: string | undefined;
}

/** The condition of a PutObject or CompleteMultipartUpload, from its headers; undefined without one. */
export function writeConditionOf(
  headers: Record<string, string | string[] | undefined>,
): WriteCondition | undefined {
  const header = (name: string) =>
    typeof headers[name] === 'string' ? (headers[name] as string).trim() : undefined;
  const ifNoneMatch = header('if-none-match');
  const ifMatch = header('if-match');
  if (ifNoneMatch === undefined && ifMatch === undefined) return undefined;
  if (ifNoneMatch !== undefined && ifNoneMatch !== '*') {
    throw notImplemented('If-None-Match with another value than * on a write');
  }
  return { ifNoneMatch: ifNoneMatch !== undefined, ifMatch };
}

/**
 * What a conditional write finds at its key: a file (`id`), or a folder marker (`id` its key), and
 * whether new content of the file waits for its scan, which has changed the object already though
 * the file still shows the ETag of the content before.
 */
interface Found {
  id: string;
  etag: string;
  pending: boolean;
}

/** The object S3 shows at `key` as a conditional write sees it, read with `q`. */
async function foundAt(
  services: Pick<ObjectServices, 'db' | 'folders'>,
  q: Queryable,
  caller: Caller,
  key: string,
): Promise<Found | undefined> {
  const place = placeOf(key);
  if (place.kind === 'folder') {
    const marker = await markerShown(services, caller, place.folderPath, q);
    return marker && { id: key, etag: EMPTY_ETAG, pending: false };
  }
  const file = await shownAt(services, caller, key, { file: await findByKey(q, caller.project.id, key) });
  return file && { id: file.id, etag: etagOf(file), pending: await hasContentInScan(q, file.id) };
}

/** Whether `condition` asks for a given ETag (If-Match other than `*`). */
const namesEtag = (condition: WriteCondition) =>
  condition.ifMatch !== undefined && !anyEtag(condition.ifMatch);

/** Why the object at a key (`found`, or none) fails `condition`; undefined when it meets it. */
function unmet(condition: WriteCondition, found: Found | undefined): S3Error | undefined {
  if (condition.ifMatch !== undefined) {
    // S3 answers If-Match over no object as that missing key.
    if (!found) return noSuchKey();
    // Any object at the key meets `*`; otherwise new content waiting for its scan is a write in
    // progress whose ETag the object does not show yet: not a mismatch (412 would say the object is
    // another's for good), a conflict to try again once it settles.
    if (found.pending && namesEtag(condition)) return conditionalRequestConflict();
    if (!listsEtag(condition.ifMatch, found.etag, 'strong')) return preconditionFailed();
  }
  if (condition.ifNoneMatch && found) return preconditionFailed();
  return undefined;
}

/**
 * Checks a conditional write against the object at `key` before a byte is stored (412
 * PreconditionFailed; If-Match over no object, 404 NoSuchKey; If-Match over an object whose new
 * content waits for its scan, 409 ConditionalRequestConflict), and answers the guard the transaction
 * recording the write runs: with the key locked, the object there must be the one checked, with no
 * new content waiting, or a write that came in between won (409 ConditionalRequestConflict) and this
 * one is refused, its bytes removed.
 */
export async function guardOf(
  services: Pick<ObjectServices, 'db' | 'folders'>,
  caller: Caller,
  key: string,
  condition: WriteCondition | undefined,
): Promise<WriteGuard | undefined> {
  if (!condition) return undefined;
  const checked = await foundAt(services, services.db, caller, key);
  const refused = unmet(condition, checked);
  if (refused) throw refused;
  return async (q) => {
    await lockKey(q, caller.project.id, key);
    const now = await foundAt(services, q, caller, key);
    if (now?.id !== checked?.id || now?.etag !== checked?.etag || (now?.pending && namesEtag(condition))) {
      throw conditionalRequestConflict();
    }
  };
}

/** The folder marker S3 shows at `path/` (its creation time); an upload token reads only its own files. */
export function markerShown(
  services: Pick<ObjectServices, 'folders'>,
  caller: Caller,
  path: string,
  q?: Queryable,
): Promise<{ created_at: Date } | undefined> {
  if (caller.principal.kind === 'upload_token') return Promise.resolve(undefined);
  return services.folders.markerAt(caller.project.id, path, q);
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
  services: Pick<ObjectServices, 'db'>,
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

/** The bytes of an object a read or a copy takes: its current content, or one of its versions. */
export interface Content {
  storageKey: string;
  size: number;
  contentType: string;
  /** The standard headers stored with these bytes (see storedHeadersOf). */
  headers: HttpHeaders;
  etag: string;
  modified: Date;
  /** The version these bytes are, where the project keeps versions or one was asked for. */
  versionId: string | undefined;
}

/**
 * The file's current content, or with `versionId` one of its versions (NoSuchVersion when it has no
 * such version); where the project keeps versions, the version it is.
 */
export async function contentOf(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  file: FileRow,
  versionId: string | null,
): Promise<Content> {
  const current = {
    storageKey: file.storage_key,
    size: file.size_bytes,
    contentType: file.content_type,
    headers: file.http_headers ?? {},
    etag: etagOf(file),
    modified: file.updated_at,
  };
  if (!caller.project.settings.versioning_enabled && (versionId === null || versionId === 'null')) {
    return { ...current, versionId: undefined };
  }
  if (versionId === null || versionId === 'null') {
    return { ...current, versionId: await newestVersionId(services.db, file.id) };
  }
  const version = await findVersion(services.db, file.id, versionId);
  if (!version) throw noSuchVersion();
  const isCurrent = version.storage_key === file.storage_key;
  return {
    storageKey: version.storage_key,
    size: version.size_bytes,
    contentType: version.content_type,
    headers: version.http_headers ?? {},
    etag: isCurrent ? current.etag : etagOf(version),
    modified: new Date(version.created_at),
    versionId: version.id,
  };
}

/**
 * What GetObject sends of the object `key`: on the local store, where its bytes lie (a small object's
 * already read with its sidecar's line), for sendSlices; the store's stream elsewhere.
 */
export async function objectBody(
  store: ObjectStore,
  key: string,
  range: ByteRange | undefined,
): Promise<Slice[] | Readable> {
  return isLocalStore(store) ? store.slicesOf(key, range) : store.read(key, range);
}

/**
 * The byte range of a GetObject (`Range: bytes=…`), undefined for the whole object; one past its end
 * is 416 InvalidRange, naming the range and the object's size as S3 does.
 */
export function rangeOf(header: string | undefined, size: number) {
  try {
    return parseRange(header, size);
  } catch {
    throw new S3Error(416, 'InvalidRange', 'The requested range is not satisfiable', {
      headers: { 'content-range': `bytes */${size}` },
      details: { RangeRequested: header ?? '', ActualObjectSize: String(size) },
    });
  }
}

/** A part number as S3 sends it: a whole number from 1 to 10,000. */
export function partNumberOf(value: string | null): number {
  const number = Number(value);
  if (!value || !/^\d+$/.test(value) || number < 1 || number > 10_000) {
    throw invalidArgument('Part number must be an integer between 1 and 10000, inclusive');
  }
  return number;
}

/** The part a GetObject or HeadObject reads (`partNumber`), undefined for the whole object; never with a Range. */
export function readPartNumber(
  headers: Record<string, string | string[] | undefined>,
  query: URLSearchParams,
): number | undefined {
  const value = query.get('partNumber');
  if (value === null) return undefined;
  const partNumber = partNumberOf(value);
  if (headers.range !== undefined) {
    throw invalidRequest('Cannot specify both Range header and partNumber query parameter');
  }
  return partNumber;
}

/** Part `partNumber` of `content`: where it lies, and how many parts the object has. */
export async function partOf(store: ObjectStore, content: Content, partNumber: number): Promise<ObjectPart> {
  let part: ObjectPart | undefined;
  try {
    part = await store.headPart(content.storageKey, partNumber);
  } catch (error) {
    if (!isStoreError(error, 'InvalidRange')) throw error;
    const count = error.details?.parts_count;
    throw invalidPartNumber(partNumber, typeof count === 'number' ? count : undefined);
  }
  if (!part) throw noSuchKey();
  return part;
}

/**
 * Writes `body` at `key`: a new file, new content of the file there, or (a key ending in /) a folder;
 * `metadata` becomes the file's, exactly, or, undefined, leaves the metadata of a file there as it is;
 * `headers` are the new content's, replacing whatever the content before had, as S3 replaces an
 * object whole.
 */
export async function putObject(
  services: ObjectServices,
  caller: Caller,
  key: string,
  request: {
    size: number;
    contentType: string;
    /** From an S3 request, strings; from a copy's source, its file's values as they are. */
    metadata: Record<string, unknown> | undefined;
    headers: HttpHeaders;
    body: Readable;
    guard?: WriteGuard;
  },
): Promise<{ etag: string; file?: FileRow; versionId?: string }> {
  const place = placeOf(key);
  if (place.kind === 'folder') {
    if (request.size !== 0) throw invalidRequest('A key ending in / is a folder: it takes no bytes');
    request.body.resume();
    await services.folders.markPath(caller.project.id, place.folderPath, request.guard);
    return { etag: EMPTY_ETAG };
  }
  const existing = await replaceableAt(services, caller, key);
  const { metadata } = request;
  const http_headers = Object.keys(request.headers).length > 0 ? request.headers : undefined;
  if (existing) {
    const outcome = await services.ingest.writeContent(
      caller,
      existing,
      { content_type: request.contentType, size_bytes: request.size, metadata, http_headers },
      request.body,
      request.guard,
    );
    return {
      // The stored bytes' ETag, also while they wait for their scan and the file shows the content before.
      etag: outcome.etag,
      file: outcome.file,
      versionId: await writtenVersion(services, caller, outcome.file, {
        contentId: outcome.version_id,
        superseded: outcome.status === 'superseded',
      }),
    };
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
      http_headers,
    },
    request.body,
    { guard: request.guard },
  );
  return {
    etag: etagOf(file),
    file,
    versionId: await writtenVersion(services, caller, file, { contentId: null }),
  };
}

/**
 * The version id a write to a versioning-enabled bucket answers with, the one ListObjectVersions and
 * HeadObject show: its new content's (`contentId`), or the first version of the file it made; none
 * for content a newer write overtook, which is no version at all.
 */
export async function writtenVersion(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  file: FileRow,
  { contentId, superseded = false }: { contentId: string | null; superseded?: boolean },
): Promise<string | undefined> {
  if (!caller.project.settings.versioning_enabled || superseded) return undefined;
  return contentId ?? (await firstVersionId(services.db, file.id));
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

/**
 * Deletes the file at `key` (or the folder marker `key/`); a key with nothing is no error, as in S3,
 * nor is one that Coffer cannot hold (`a//b`), at which nothing can be.
 */
export async function deleteObject(
  services: ObjectServices,
  caller: Caller,
  key: string,
  audit: AuditContext,
): Promise<void> {
  const place = placeIfAny(key);
  if (!place) return;
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

/**
 * Deletes one version of the object at `key` for good, named as ListObjectVersions names it: an
 * earlier version goes and the object stays. Where the project keeps no versions the object's only
 * version is `null`, which S3 deletes as the object itself. The newest version is the file's content,
 * which Coffer removes only with the file.
 */
export async function deleteObjectVersion(
  services: ObjectServices & Pick<Services, 'versions'>,
  caller: Caller,
  key: string,
  versionId: string,
  audit: AuditContext,
): Promise<void> {
  // A folder marker has one version, "null", as ListObjectVersions shows it. A key Coffer cannot hold
  // is looked up as any other, and shows no file.
  if (!caller.project.settings.versioning_enabled || placeIfAny(key)?.kind === 'folder') {
    if (versionId !== 'null') throw noSuchVersion();
    return deleteObject(services, caller, key, audit);
  }
  const file = await shownAt(services, caller, key);
  if (!file) throw noSuchVersion();
  const newest = (await newestVersionId(services.db, file.id)) ?? 'null';
  if (versionId === newest) {
    throw notImplemented(
      'Deleting the current version of an object (delete the key, without versionId, to delete it)',
    );
  }
  try {
    await services.versions.remove(caller, file.id, versionId, audit);
  } catch (error) {
    if (isDomainError(error, 'LEGAL_HOLD')) throw accessDenied('The object is under a legal hold');
    if (isDomainError(error, 'NOT_FOUND')) throw noSuchVersion();
    throw error;
  }
}

/**
 * The size a PutObject or UploadPart declares: the decoded length of an aws-chunked body, else
 * Content-Length; past S3's 5 GiB for one PUT, EntityTooLarge before a byte is read.
 */
export function declaredSize(
  headers: Record<string, string | string[] | undefined>,
  decoded?: number,
): number {
  const size = decoded ?? contentLengthOf(headers['content-length']);
  if (size > MAX_PART_SIZE) throw entityTooLarge(size, MAX_PART_SIZE);
  return size;
}

function contentLengthOf(length: string | string[] | undefined): number {
  if (typeof length !== 'string') {
    throw new S3Error(411, 'MissingContentLength', 'You must provide the Content-Length HTTP header.');
  }
  if (!/^\d+$/.test(length)) throw invalidArgument('Content-Length must be a whole number of bytes');
  return Number(length);
}

/** `x-amz-copy-source`: `[/]bucket/key[?versionId=…]`, percent-encoded. */
function copySourceOf(header: string): { bucket: string; key: string; versionId: string | null } {
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
  const versionId = new URLSearchParams(query).get('versionId');
  return { bucket: decoded.slice(0, slash), key: decoded.slice(slash + 1), versionId };
}

/** What a CopyObject or UploadPartCopy copies, and the key and version (if any) its request named. */
export interface CopySource {
  file: FileRow;
  content: Content;
  named: { key: string; versionId: string | null };
}

/**
 * What a CopyObject or UploadPartCopy copies: the object `x-amz-copy-source` names, or the version of it
 * that it names, when the caller may read it and its `x-amz-copy-source-if-*` conditions hold.
 */
export async function copySource(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  headers: Record<string, string | string[] | undefined>,
): Promise<CopySource> {
  requireScope(caller, 'files:read');
  const header = headers['x-amz-copy-source'];
  if (typeof header !== 'string') throw invalidArgument('Copy Source must name one object');
  const named = copySourceOf(header);
  if (named.bucket !== caller.project.bucket) throw noSuchBucket();
  const file = await fileAt(services, caller, named.key);
  requireReadable(file);
  const content = await contentOf(services, caller, file, named.versionId);
  const conditions = Object.fromEntries(
    Object.entries(headers)
      .filter(([name]) => name.startsWith('x-amz-copy-source-if-'))
      .map(([name, value]) => [name.replace('x-amz-copy-source-', ''), value]),
  );
  checkConditions(conditions, content, true);
  return { file, content, named };
}

/** `x-amz-copy-source-range` of an UploadPartCopy: `bytes=first-last`, within the source; undefined for all of it. */
export function copyRangeOf(header: string | string[] | undefined, size: number): ByteRange | undefined {
  if (header === undefined) return undefined;
  const match = typeof header === 'string' ? /^bytes=(\d+)-(\d+)$/.exec(header.trim()) : null;
  if (!match) {
    throw invalidArgument(
      'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy',
    );
  }
  const [start, end] = [Number(match[1]), Number(match[2])];
  if (start > end || end >= size) {
    throw new S3Error(416, 'InvalidRange', `The range is not within the source object of size ${size}`);
  }
  return { start, end };
}

/** `x-amz-metadata-directive` of a CopyObject: COPY (its default) or REPLACE; S3 knows no other. */
export function metadataDirectiveOf(
  headers: Record<string, string | string[] | undefined>,
): 'COPY' | 'REPLACE' {
  const directive = headers['x-amz-metadata-directive'] ?? 'COPY';
  if (directive !== 'COPY' && directive !== 'REPLACE') throw invalidArgument('Unknown metadata directive.');
  return directive;
}

/**
 * CopyObject within the bucket: the source's bytes streamed from the store into a new file (or new
 * content) at `key`, with exactly the source's metadata and stored headers (COPY) or the request's
 * (REPLACE), none included, whatever the file there had; the source's type unless REPLACE names one. `guard` holds
 * the write to the destination's condition. A copy onto its own key must change something: REPLACE,
 * or a version named (restoring it); otherwise it is refused, as in S3, before a byte is read.
 */
export async function copyObject(
  services: ObjectServices,
  caller: Caller,
  source: CopySource,
  key: string,
  request: {
    replace: boolean;
    contentType: string | undefined;
    metadata: Record<string, string>;
    headers: HttpHeaders;
    guard?: WriteGuard;
  },
) {
  const { file, content, named } = source;
  if (named.key === key && named.versionId === null && !request.replace) throw copyToItself();
  const bytes = await services.store.read(content.storageKey);
  // A write refused before its bytes are read leaves the store's stream to be closed here.
  return putObject(services, caller, key, {
    size: content.size,
    contentType: request.replace ? (request.contentType ?? content.contentType) : content.contentType,
    // COPY keeps every value of the source's metadata, those with no header form (numbers, …) too.
    metadata: request.replace ? request.metadata : file.metadata,
    // The headers of the content copied: a version's own when one is named.
    headers: request.replace ? request.headers : content.headers,
    body: bytes,
    guard: request.guard,
  }).finally(() => bytes.destroy());
}
