import { parseDate } from '../../domain/dates.ts';
import {
  badRequest,
  invalidState,
  isDomainError,
  legalHold,
  notFound,
  quarantined,
  validationError,
} from '../../domain/errors.ts';
import type { Caller, UploadTokenPrincipal } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { isId } from '../../lib/ids.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../lib/json-depth.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { recordAudit } from '../audit/service.ts';
import { recordEvent } from '../events/repo.ts';
import type { FolderService } from '../folders/service.ts';
import type { MetadataSchemaService } from '../metadata-schema/service.ts';
import type { Project } from '../projects/schemas.ts';
import { heldAt, keyOfFile } from './key-repo.ts';
import { type FileFilters, listFiles } from './list-repo.ts';
import * as repo from './repo.ts';
import {
  checkMetadataSize,
  MAX_URL_TTL_SECONDS,
  MIN_URL_TTL_SECONDS,
  normalizeTags,
  SCAN_UNAVAILABLE,
} from './rules.ts';
import type { FileObject, ListQuery } from './schemas.ts';

export interface PresignedUrl {
  url: string;
  expires_at: string;
}

/**
 * Whether an upload token acts for the owner the file was uploaded for: same user (and organization,
 * when the file has one). A replacement token, issued when the first expired, may so finish its upload.
 */
function sameOwner(principal: UploadTokenPrincipal, file: Visibility): boolean {
  return (
    principal.ownerUserId !== null &&
    principal.ownerUserId === file.owner_user_id &&
    (file.owner_org_id === null || principal.ownerOrgId === file.owner_org_id)
  );
}

/** What decides whether a caller sees a file. */
export type Visibility = Pick<
  repo.FileRow,
  'deleted_at' | 'status' | 'upload_token_id' | 'owner_user_id' | 'owner_org_id'
>;

/**
 * The file as this caller may see it: 404 when missing, deleted, or (for an upload token) not
 * uploaded with that token, nor with `ofSameOwner` by a token of the same owner; 409 CONFLICT when
 * quarantined, unless `allowQuarantined`.
 */
/** Whether a file shows to what the upload token `tokenId` made (null: another credential, to which all do). */
const tokenSees = (tokenId: string | null, file: Pick<Visibility, 'upload_token_id'>) =>
  tokenId === null || file.upload_token_id === tokenId;

export function visibleFile<F extends Visibility>(
  caller: Caller,
  file: F | undefined,
  options: { allowQuarantined?: boolean; ofSameOwner?: boolean } = {},
): F {
  const { principal } = caller;
  if (!file || file.deleted_at !== null) throw notFound('File');
  if (
    principal.kind === 'upload_token' &&
    !tokenSees(principal.tokenId, file) &&
    !(options.ofSameOwner && sameOwner(principal, file))
  ) {
    throw notFound('File');
  }
  if (file.status === 'quarantined' && !options.allowQuarantined) throw quarantined();
  return file;
}

/** Whether `caller` may see `file` (visibleFile, answered rather than thrown). */
export function isVisibleTo(caller: Caller, file: Visibility): boolean {
  try {
    visibleFile(caller, file);
    return true;
  } catch (error) {
    if (isDomainError(error)) return false;
    throw error;
  }
}

/**
 * The file S3 shows `caller` at `key`, read with the key held until the transaction ends (heldAt): the
 * file a write of a new file at the key finds there as it commits.
 */
export async function visibleAt(
  q: Queryable,
  caller: Caller,
  key: string,
): Promise<repo.FileRow | undefined> {
  const file = await heldAt(q, caller.project.id, key);
  return file && isVisibleTo(caller, file) ? file : undefined;
}

/**
 * visibleAt for the key of the file `fileId`, as the credential that made that file sees it: what a
 * write of the file finds at its key when no caller is at hand (the reaper settling its upload).
 */
export async function visibleAtKeyOf(
  q: Queryable,
  projectId: string,
  fileId: string,
): Promise<repo.FileRow | undefined> {
  const own = await keyOfFile(q, projectId, fileId);
  if (!own?.s3_key) return undefined;
  const file = await heldAt(q, projectId, own.s3_key);
  return file && tokenSees(own.upload_token_id, file) ? file : undefined;
}

/**
 * How long a presigned URL lives: the project's require_signed_urls ignores the caller's `ttl`
 * altogether (so no range applies to it then); otherwise `ttl` when given, in 60..86400 (422),
 * else `fallbackSeconds`.
 */
export function urlLifetimeSeconds(
  project: Project,
  ttl: number | undefined,
  fallbackSeconds: number,
): number {
  if (project.settings.require_signed_urls || ttl === undefined) return fallbackSeconds;
  if (!(ttl >= MIN_URL_TTL_SECONDS && ttl <= MAX_URL_TTL_SECONDS)) {
    throw validationError(`ttl must be between ${MIN_URL_TTL_SECONDS} and ${MAX_URL_TTL_SECONDS} seconds`, {
      field: 'ttl',
    });
  }
  return ttl;
}

/** Refuses (409 INVALID_STATE) to hand out the bytes of a file that is not ready. */
export function requireReady(file: Pick<repo.FileRow, 'status'>): void {
  if (file.status !== 'ready') {
    throw invalidState(`Only ready files can be downloaded; this file is ${file.status}`, {
      status: file.status,
    });
  }
}

function parseMetadataFilter(value: string | undefined): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  if (nestsDeeperThan(value, MAX_JSON_DEPTH)) {
    throw badRequest(`metadata nests deeper than ${MAX_JSON_DEPTH} levels`, {
      field: 'metadata',
      max_depth: MAX_JSON_DEPTH,
    });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw badRequest('metadata must be a JSON object', { field: 'metadata' });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw badRequest('metadata must be a JSON object', { field: 'metadata' });
  }
  return parsed as Record<string, unknown>;
}

export function createFileService(deps: {
  db: Db;
  store: ObjectStore;
  folders: FolderService;
  schemas: MetadataSchemaService;
}) {
  const { db, store, folders, schemas } = deps;

  /** Locks the file, checks the caller may change it, applies `change`, and returns the updated file. */
  async function mutate(
    caller: Caller,
    fileId: string,
    change: (q: Queryable, file: repo.FileRow) => Promise<repo.FileChanges>,
    options: { allowQuarantined?: boolean } = {},
  ): Promise<FileObject> {
    return db.tx(async (q) => {
      const file = visibleFile(caller, await repo.findFile(q, caller.project.id, fileId, true), options);
      const updated = await repo.updateFile(q, caller.project.id, file.id, await change(q, file));
      return repo.toFileObject(updated!);
    });
  }

  return {
    async get(caller: Caller, fileId: string): Promise<FileObject> {
      return repo.toFileObject(visibleFile(caller, await repo.findFile(db, caller.project.id, fileId)));
    },

    async list(caller: Caller, query: ListQuery) {
      if (query.cursor !== undefined && !isId('file', query.cursor)) {
        throw badRequest('cursor must be a next_cursor value from a previous page', { field: 'cursor' });
      }
      const filters: FileFilters = {
        folderId: query.folder_id === 'root' ? null : query.folder_id,
        q: query.q,
        tags: query.tags?.map((tag) => tag.trim()),
        category: query.category,
        status: query.status,
        dateFrom: parseDate('date_from', query.date_from),
        dateTo: parseDate('date_to', query.date_to, true),
        sizeMin: query.size_min === undefined ? undefined : Math.ceil(query.size_min),
        sizeMax: query.size_max === undefined ? undefined : Math.floor(query.size_max),
        metadata: parseMetadataFilter(query.metadata),
      };
      const { rows, total } = await listFiles(db, caller.project.id, filters, query);
      const hasMore = rows.length > query.limit;
      const items = rows.slice(0, query.limit).map(repo.toFileObject);
      return {
        items,
        total,
        limit: query.limit,
        offset: query.cursor === undefined ? query.offset : 0,
        has_more: hasMore,
        next_cursor: hasMore ? items[items.length - 1]!.id : null,
      };
    },

    /** A download URL for a ready file; the caller's TTL applies unless the project requires its own. */
    async download(caller: Caller, fileId: string, ttl: number | undefined): Promise<PresignedUrl> {
      const seconds = urlLifetimeSeconds(caller.project, ttl, caller.project.settings.signed_url_ttl_seconds);
      const file = visibleFile(caller, await repo.findFile(db, caller.project.id, fileId));
      requireReady(file);
      return presignDownload(store, file, seconds);
    },

    setTags(caller: Caller, fileId: string, tags: string[], mode: 'replace' | 'add'): Promise<FileObject> {
      return mutate(caller, fileId, async (_q, file) => ({
        tags: normalizeTags(mode === 'replace' ? tags : [...file.tags, ...tags]),
      }));
    },

    setMetadata(
      caller: Caller,
      fileId: string,
      metadata: Record<string, unknown>,
      mode: 'replace' | 'merge',
    ): Promise<FileObject> {
      return mutate(caller, fileId, async (q, file) => {
        const next = mode === 'replace' ? metadata : { ...file.metadata, ...metadata };
        checkMetadataSize(next);
        await schemas.check(q, caller.project, next);
        return { metadata: next };
      });
    },

    move(caller: Caller, fileId: string, folderId: string | null): Promise<FileObject> {
      return mutate(caller, fileId, async (q) => {
        if (folderId !== null && !(await folders.exists(q, caller.project.id, folderId)))
          throw notFound('Folder');
        return { folder_id: folderId };
      });
    },

    /** A quarantined file may be released (so that it can be deleted), never newly held. */
    setLegalHold(
      caller: Caller,
      fileId: string,
      hold: boolean,
      reason: string | undefined,
      audit: AuditContext,
    ): Promise<FileObject> {
      return mutate(
        caller,
        fileId,
        async (q, file) => {
          const changes = { legal_hold: hold, legal_hold_reason: hold ? (reason ?? null) : null };
          await recordAudit(q, audit, {
            action: hold ? 'file.legal_hold.place' : 'file.legal_hold.release',
            projectId: caller.project.id,
            targets: { file_id: file.id },
            before: { legal_hold: file.legal_hold },
            after: changes,
          });
          return changes;
        },
        { allowQuarantined: !hold },
      );
    },

    /** Soft delete: the file answers 404 from now on; its objects are removed after the grace period. */
    async remove(caller: Caller, fileId: string, audit: AuditContext): Promise<FileObject> {
      return db.tx(async (q) => {
        const file = visibleFile(caller, await repo.findFile(q, caller.project.id, fileId, true), {
          allowQuarantined: true,
        });
        if (file.legal_hold) throw legalHold();
        const deleted = await repo.transitionFile(q, caller.project.id, file.id, file.status, 'deleted');
        await recordEvent(q, caller.project, 'file.deleted', deleted!);
        await recordAudit(q, audit, {
          action: 'file.delete',
          projectId: caller.project.id,
          targets: { file_id: file.id },
        });
        return repo.toFileObject(deleted!);
      });
    },

    /**
     * Scans a file again that was failed only because it could not be scanned (the scanner stayed
     * unavailable for the retry window): the file is `processing` again and its scan job queued, in
     * one transaction. Any other file is refused with 409 INVALID_STATE.
     */
    async rescan(caller: Caller, fileId: string, audit: AuditContext): Promise<FileObject> {
      return db.tx(async (q) => {
        const file = visibleFile(caller, await repo.findFile(q, caller.project.id, fileId, true));
        if (file.status !== 'failed' || !file.failure_reason?.startsWith(SCAN_UNAVAILABLE)) {
          throw invalidState(
            `Only files failed because the scanner was unavailable can be scanned again; this file is ${file.status}`,
            { status: file.status, failure_reason: file.failure_reason },
          );
        }
        const queued = await repo.transitionFile(q, caller.project.id, file.id, 'failed', 'processing', {
          failure_reason: null,
        });
        await enqueueJob(q, 'scan', caller.project.id, file.id);
        await recordAudit(q, audit, {
          action: 'file.rescan',
          projectId: caller.project.id,
          targets: { file_id: file.id },
          before: { status: file.status, failure_reason: file.failure_reason },
          after: { status: queued!.status, failure_reason: queued!.failure_reason },
        });
        return repo.toFileObject(queued!);
      });
    },
  };
}

/** A download URL living `seconds` (see urlLifetimeSeconds). */
export async function presignDownload(
  store: ObjectStore,
  file: Pick<repo.FileRow, 'storage_key' | 'filename' | 'content_type'>,
  seconds: number,
): Promise<PresignedUrl> {
  const expiresAt = new Date(Date.now() + seconds * 1000);
  const url = await store.presignGet(file.storage_key, {
    expiresAt,
    filename: file.filename,
    contentType: file.content_type,
  });
  return { url, expires_at: expiresAt.toISOString() };
}

export type FileService = ReturnType<typeof createFileService>;
