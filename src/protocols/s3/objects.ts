import { isDomainError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Queryable } from '../../infra/db.ts';
import type { AuditContext } from '../../modules/audit/schemas.ts';
import { findByKey } from '../../modules/files/key-repo.ts';
import type { FileRow, HttpHeaders } from '../../modules/files/repo.ts';
import { isVisibleTo, visibleAt } from '../../modules/files/service.ts';
import type { WriteGuard, WrittenBody } from '../../modules/ingest/intake.ts';
import { firstVersionId, newestVersionId } from '../../modules/versions/repo.ts';
import type { Services } from '../../services.ts';
import {
  accessDenied,
  invalidObjectState,
  invalidRequest,
  noSuchKey,
  noSuchVersion,
  notImplemented,
} from './errors.ts';
import { EMPTY_ETAG, etagOf } from './etag.ts';
import { placeIfAny, placeOf } from './keys.ts';

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
  return file && isVisibleTo(caller, file) ? file : undefined;
}

/** The newest file S3 shows at `key` that the caller may see; NoSuchKey otherwise. */
export async function fileAt(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  key: string,
  atKey?: { file: FileRow | undefined },
): Promise<FileRow> {
  const file = await shownAt(services, caller, key, atKey);
  if (!file) throw noSuchKey(key);
  return file;
}

/** A ready file's bytes for GetObject; a file still being checked answers InvalidObjectState. */
export function requireReadable(file: FileRow): void {
  if (file.status !== 'ready') throw invalidObjectState(file.status);
}

/**
 * Writes `body` at `key`: a new file, new content of the file there, or (a key ending in /) a folder;
 * `metadata` becomes the file's, exactly, or, undefined, leaves the metadata of a file there as it is;
 * `tags` (Coffer's form, see tags.ts) likewise become the file's tags, once the write is kept (not
 * when a newer write overtook it); a folder takes none. `headers`, and the checksum `body` verified if
 * any, are the new content's, replacing whatever the content before had, as S3 replaces an object whole.
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
    tags?: string[];
    headers: HttpHeaders;
    body: WrittenBody;
    guard?: WriteGuard;
  },
): Promise<{ etag: string; file?: FileRow; versionId?: string }> {
  const place = placeOf(key);
  if (place.kind === 'folder') {
    if (request.size !== 0) throw invalidRequest('A key ending in / is a folder: it takes no bytes');
    if (request.tags?.length) throw notImplemented('Tags on a folder (a key ending in /)');
    request.body.resume();
    await services.folders.markPath(caller.project.id, place.folderPath, request.guard);
    return { etag: EMPTY_ETAG };
  }
  const { metadata } = request;
  const http_headers = Object.keys(request.headers).length > 0 ? request.headers : undefined;
  const written = await services.ingest.writeAtKey(
    caller,
    {
      filename: place.filename,
      content_type: request.contentType,
      size_bytes: request.size,
      folder_id: await folderFor(services, caller, place.folderPath),
      exact_folder: true,
      metadata,
      http_headers,
      // The file's, new or there (an upload token's merged in, as on any of its uploads).
      tags: request.tags,
    },
    request.body,
    {
      guard: request.guard,
      holder: (q) => visibleAt(q, caller, key),
    },
  );
  if (written.kind === 'overtaken') return { etag: written.etag };
  if (written.kind === 'content') {
    const { outcome } = written;
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
  const { file } = written;
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
 * earlier version goes and the object stays; the current version goes and the one before it becomes
 * current again, or, with none before it, the object goes, as in S3. Where the project keeps no
 * versions the object's only version is `null`, which S3 deletes as the object itself.
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
  // A file from before the project kept versions shows its content as the version "null".
  if (versionId === 'null' && (await newestVersionId(services.db, file.id)) === undefined) {
    return deleteObject(services, caller, key, audit);
  }
  try {
    const removed = await services.versions.remove(caller, file.id, versionId, audit, {
      newest: 'reinstate',
    });
    // The file's only version: the object goes with it.
    if (!removed) await services.files.remove(caller, file.id, audit);
  } catch (error) {
    if (isDomainError(error, 'LEGAL_HOLD')) throw accessDenied('The object is under a legal hold');
    if (isDomainError(error, 'NOT_FOUND')) throw noSuchVersion();
    throw error;
  }
}
