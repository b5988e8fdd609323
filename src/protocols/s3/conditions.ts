import type { Caller } from '../../domain/principal.ts';
import type { Queryable } from '../../infra/db.ts';
import { anyEtag, listsEtag } from '../../lib/etag.ts';
import { findByKey, lockKey } from '../../modules/files/key-repo.ts';
import type { HttpHeaders } from '../../modules/files/repo.ts';
import { hasContentInScan } from '../../modules/ingest/content-repo.ts';
import type { WriteGuard } from '../../modules/ingest/intake.ts';
import {
  conditionalRequestConflict,
  noSuchKey,
  notImplemented,
  preconditionFailed,
  S3Error,
} from './errors.ts';
import { EMPTY_ETAG, etagOf } from './etag.ts';
import { placeOf } from './keys.ts';
import { markerShown, type ObjectServices, shownAt } from './objects.ts';

/**
 * The conditional headers of a read (RFC 9110 §13 as S3 applies them): 304 or 412 when they fail. A 304
 * carries the validators a 200 would, and its Cache-Control and Expires (RFC 9110 §15.4.5), so caches
 * can refresh what they hold. A 412 names the condition that failed, as S3 does: for a copy's source
 * (`forCopy`, its `x-amz-copy-source-if-*` headers passed without that prefix), with the prefix.
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
  const failed = (condition: string) =>
    preconditionFailed(forCopy ? `x-amz-copy-source-${condition}` : condition);
  const notModified = (condition: string) =>
    forCopy ? failed(condition) : new S3Error(304, 'NotModified', 'Not Modified', { headers: validators });
  const header = (name: string) =>
    typeof headers[name] === 'string' ? (headers[name] as string) : undefined;
  const matches = (list: string, comparison?: 'strong') => listsEtag(list, etag, comparison);
  const seconds = Math.floor(modified.getTime() / 1000);
  const since = (value: string) => Math.floor(Date.parse(value) / 1000);
  const ifMatch = header('if-match');
  const ifNoneMatch = header('if-none-match');
  const ifModifiedSince = header('if-modified-since');
  const ifUnmodifiedSince = header('if-unmodified-since');
  if (ifMatch !== undefined && !matches(ifMatch, 'strong')) throw failed('If-Match');
  if (ifMatch === undefined && ifUnmodifiedSince !== undefined && seconds > since(ifUnmodifiedSince)) {
    throw failed('If-Unmodified-Since');
  }
  if (ifNoneMatch !== undefined && matches(ifNoneMatch)) throw notModified('If-None-Match');
  if (ifNoneMatch === undefined && ifModifiedSince !== undefined && seconds <= since(ifModifiedSince)) {
    throw notModified('If-Modified-Since');
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

/** Why the object at `key` (`found`, or none) fails `condition`; undefined when it meets it. */
function unmet(key: string, condition: WriteCondition, found: Found | undefined): S3Error | undefined {
  if (condition.ifMatch !== undefined) {
    // S3 answers If-Match over no object as that missing key.
    if (!found) return noSuchKey(key);
    // Any object at the key meets `*`; otherwise new content waiting for its scan is a write in
    // progress whose ETag the object does not show yet: not a mismatch (412 would say the object is
    // another's for good), a conflict to try again once it settles.
    if (found.pending && namesEtag(condition)) return conditionalRequestConflict();
    if (!listsEtag(condition.ifMatch, found.etag, 'strong')) return preconditionFailed('If-Match');
  }
  if (condition.ifNoneMatch && found) return preconditionFailed('If-None-Match');
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
  const refused = unmet(key, condition, checked);
  if (refused) throw refused;
  return async (q) => {
    await lockKey(q, caller.project.id, key);
    const now = await foundAt(services, q, caller, key);
    if (now?.id !== checked?.id || now?.etag !== checked?.etag || (now?.pending && namesEtag(condition))) {
      throw conditionalRequestConflict();
    }
  };
}
