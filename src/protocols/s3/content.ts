import type { Readable } from 'node:stream';
import type { Caller } from '../../domain/principal.ts';
import { parseRange } from '../../http/range.ts';
import type { Slice } from '../../infra/storage/local/slices.ts';
import { isLocalStore } from '../../infra/storage/local/store.ts';
import {
  type ByteRange,
  isStoreError,
  type ObjectPart,
  type ObjectStore,
} from '../../infra/storage/object-store.ts';
import { isId } from '../../lib/ids.ts';
import type { ContentChecksum, FileRow, HttpHeaders } from '../../modules/files/repo.ts';
import { findVersion, newestVersionId } from '../../modules/versions/repo.ts';
import {
  invalidArgument,
  invalidPartNumber,
  invalidRequest,
  noSuchKey,
  noSuchVersion,
  S3Error,
} from './errors.ts';
import { etagOf } from './etag.ts';
import type { ObjectServices } from './objects.ts';

/** The bytes of an object a read or a copy takes: its current content, or one of its versions. */
export interface Content {
  storageKey: string;
  size: number;
  contentType: string;
  /** The standard headers stored with these bytes (see storedHeadersOf). */
  headers: HttpHeaders;
  /** The checksum the client that wrote these bytes sent with them, verified. */
  checksum: ContentChecksum | undefined;
  /** The SHA-256 of these bytes, hex, once known (see storedChecksumHeaders). */
  sha256: string | undefined;
  etag: string;
  modified: Date;
  /** The version these bytes are, where the project keeps versions or one was asked for. */
  versionId: string | undefined;
}

/** What a file's row, or a version's, says of its bytes. */
const bytesOf = (
  row: Pick<
    FileRow,
    'storage_key' | 'size_bytes' | 'content_type' | 'http_headers' | 'client_checksum' | 'checksum_sha256'
  >,
) => ({
  storageKey: row.storage_key,
  size: row.size_bytes,
  contentType: row.content_type,
  headers: row.http_headers ?? {},
  checksum: row.client_checksum ?? undefined,
  sha256: row.checksum_sha256 ?? undefined,
});

/**
 * Refuses a version id no version can have, as S3 does (400 InvalidArgument), before the object is
 * looked for: one that is neither `null` nor of the form Coffer makes them in. The `versionId`
 * parameter is named in the error, with its value; one in a copy's source (`inCopySource`) is not.
 */
export function checkVersionId(versionId: string | null, { inCopySource = false } = {}): void {
  if (versionId === null || versionId === 'null' || isId('ver', versionId)) return;
  throw invalidArgument(
    versionId === '' ? 'Version id cannot be the empty string' : 'Invalid version id specified',
    inCopySource ? undefined : { ArgumentName: 'versionId', ArgumentValue: versionId },
  );
}

/**
 * The file's current content, or with `versionId` one of its versions (NoSuchVersion, naming `key`
 * and the version, when it has no such version); where the project keeps versions, the version it is.
 */
export async function contentOf(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  file: FileRow,
  { key, versionId }: { key: string; versionId: string | null },
): Promise<Content> {
  const current = { ...bytesOf(file), etag: etagOf(file), modified: file.updated_at };
  if (!caller.project.settings.versioning_enabled && (versionId === null || versionId === 'null')) {
    return { ...current, versionId: undefined };
  }
  if (versionId === null || versionId === 'null') {
    return { ...current, versionId: await newestVersionId(services.db, file.id) };
  }
  const version = await findVersion(services.db, file.id, versionId);
  if (!version) throw noSuchVersion(key, versionId);
  const isCurrent = version.storage_key === file.storage_key;
  return {
    ...bytesOf(version),
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
