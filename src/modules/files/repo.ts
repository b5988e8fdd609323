import type { Queryable } from '../../infra/db.ts';
import { idBound } from '../../lib/ids.ts';
import type { Category, FileStatus } from './rules.ts';
import type { FileObject } from './schemas.ts';
import { checkTransition, type FileTarget } from './states.ts';

/**
 * Headers an S3 write stores with an object and its reads answer (Cache-Control, Content-Disposition,
 * Content-Encoding, Content-Language, Expires): lowercase names, values as given.
 */
export type HttpHeaders = Record<string, string>;

/**
 * An additional checksum of a content's bytes that an S3 write sent and Coffer verified as they
 * arrived: S3's name of its algorithm (crc32, crc32c, crc64nvme, sha1, sha256) and the base64 of its
 * digest, as S3 answers it. `Algorithm` narrows the name where the S3 endpoint knows it.
 */
export interface ContentChecksum<Algorithm extends string = string> {
  algorithm: Algorithm;
  value: string;
}

export interface FileRow {
  id: string;
  project_id: string;
  folder_id: string | null;
  status: FileStatus;
  filename: string;
  content_type: string;
  size_bytes: number;
  category: Category;
  storage_key: string;
  checksum_sha256: string | null;
  /** The store's ETag of the content, quoted, as sealed (null for files stored before it was kept). */
  etag: string | null;
  metadata: Record<string, unknown>;
  /** The standard headers S3 stores with the content (see HttpHeaders); null for none. */
  http_headers: HttpHeaders | null;
  /** The checksum an S3 write sent with the content (see ContentChecksum); null for none. */
  client_checksum: ContentChecksum | null;
  tags: string[];
  owner_user_id: string | null;
  owner_org_id: string | null;
  upload_token_id: string | null;
  legal_hold: boolean;
  failure_reason: string | null;
  scan_signature: string | null;
  created_at: Date;
  updated_at: Date;
  upload_expires_at: Date | null;
  deleted_at: Date | null;
}

export const COLUMNS = `id, project_id, folder_id, status, filename, content_type, size_bytes, category, storage_key,
  checksum_sha256, etag, metadata, http_headers, client_checksum, tags, owner_user_id, owner_org_id, upload_token_id, legal_hold, failure_reason,
  scan_signature, created_at, updated_at, upload_expires_at, deleted_at`;

export function toFileObject(row: FileRow): FileObject {
  return {
    id: row.id,
    project_id: row.project_id,
    folder_id: row.folder_id,
    status: row.status,
    filename: row.filename,
    content_type: row.content_type,
    size_bytes: row.size_bytes,
    category: row.category,
    storage_key: row.storage_key,
    checksum_sha256: row.checksum_sha256,
    metadata: row.metadata,
    tags: row.tags,
    owner_user_id: row.owner_user_id,
    owner_org_id: row.owner_org_id,
    legal_hold: row.legal_hold,
    failure_reason: row.failure_reason,
    scan_signature: row.scan_signature,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    deleted_at: row.deleted_at?.toISOString() ?? null,
  };
}

export type NewFile = Omit<
  FileRow,
  | 'created_at'
  | 'updated_at'
  | 'deleted_at'
  | 'legal_hold'
  | 'checksum_sha256'
  | 'etag'
  | 'failure_reason'
  | 'scan_signature'
  | 'http_headers'
  | 'client_checksum'
> &
  /** Known for a file recorded with its bytes already stored (a server-side write). */
  Partial<Pick<FileRow, 'checksum_sha256' | 'etag' | 'http_headers' | 'client_checksum'>>;

/** A jsonb parameter: null (or none) is SQL NULL, not the JSON value null. */
export const jsonOrNull = (value: unknown): string | null => (value == null ? null : JSON.stringify(value));

export async function insertFile(q: Queryable, file: NewFile): Promise<FileRow> {
  const [row] = await q.query<FileRow>(
    `INSERT INTO files (id, project_id, folder_id, status, filename, content_type, size_bytes, category, storage_key,
       metadata, tags, owner_user_id, owner_org_id, upload_token_id, upload_expires_at, checksum_sha256, etag,
       http_headers, client_checksum)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14, $15, $16, $17, $18::jsonb, $19::jsonb)
     RETURNING ${COLUMNS}`,
    [
      file.id,
      file.project_id,
      file.folder_id,
      file.status,
      file.filename,
      file.content_type,
      file.size_bytes,
      file.category,
      file.storage_key,
      JSON.stringify(file.metadata),
      file.tags,
      file.owner_user_id,
      file.owner_org_id,
      file.upload_token_id,
      file.upload_expires_at,
      file.checksum_sha256 ?? null,
      file.etag ?? null,
      jsonOrNull(file.http_headers),
      jsonOrNull(file.client_checksum),
    ],
  );
  return row!;
}

/** The file, deleted or not; `forUpdate` locks the row until the transaction ends. */
export async function findFile(
  q: Queryable,
  projectId: string,
  fileId: string,
  forUpdate = false,
): Promise<FileRow | undefined> {
  const [row] = await q.query<FileRow>(
    `SELECT ${COLUMNS} FROM files WHERE project_id = $1 AND id = $2${forUpdate ? ' FOR UPDATE' : ''}`,
    [projectId, fileId],
  );
  return row;
}

/** The file and, when it is uploaded in parts, the id of its multipart session: one round trip for confirm. */
export async function findFileAndSession(
  q: Queryable,
  projectId: string,
  fileId: string,
): Promise<{ file: FileRow; sessionId: string | null } | undefined> {
  const [row] = await q.query<FileRow & { multipart_session_id: string | null }>(
    `SELECT ${COLUMNS}, (SELECT s.id FROM multipart_sessions s WHERE s.file_id = files.id AND s.content_id IS NULL) AS multipart_session_id
     FROM files WHERE project_id = $1 AND id = $2`,
    [projectId, fileId],
  );
  if (!row) return undefined;
  const { multipart_session_id: sessionId, ...file } = row;
  return { file, sessionId };
}

/** What may change of a file outside its life's transitions (which go through transitionFile). */
export type FileChanges = Partial<
  Pick<
    FileRow,
    | 'folder_id'
    | 'metadata'
    | 'http_headers'
    | 'client_checksum'
    | 'tags'
    | 'checksum_sha256'
    | 'etag'
    | 'legal_hold'
    | 'failure_reason'
    | 'scan_signature'
    | 'storage_key'
    | 'size_bytes'
    | 'content_type'
    | 'category'
    | 'upload_expires_at'
  > & { legal_hold_reason: string | null }
>;

function setClause(changes: FileChanges, params: unknown[]): string[] {
  return Object.entries(changes)
    .filter(([, value]) => value !== undefined)
    .map(([column, value]) => {
      const json = column === 'metadata' || column === 'http_headers' || column === 'client_checksum';
      params.push(json ? jsonOrNull(value) : value);
      return `${column} = $${params.length}${json ? '::jsonb' : ''}`;
    });
}

/** Applies `changes` (and bumps updated_at) to a file in whatever state it is. */
export async function updateFile(
  q: Queryable,
  projectId: string,
  fileId: string,
  changes: FileChanges,
): Promise<FileRow | undefined> {
  const params: unknown[] = [projectId, fileId];
  const sets = [...setClause(changes, params), 'updated_at = now()'];
  const [row] = await q.query<FileRow>(
    `UPDATE files SET ${sets.join(', ')} WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    params,
  );
  return row;
}

/**
 * Moves a file from `from` to `to` (see FILE_TRANSITIONS), with `changes` in the same statement,
 * only while it is still in `from` and not deleted: undefined when a concurrent change came first.
 */
export async function transitionFile(
  q: Queryable,
  projectId: string,
  fileId: string,
  from: FileStatus,
  to: FileTarget,
  changes: FileChanges = {},
): Promise<FileRow | undefined> {
  checkTransition(from, to);
  const params: unknown[] = [projectId, fileId, from];
  const sets = [...setClause(changes, params), 'updated_at = now()'];
  if (to === 'deleted') sets.push('deleted_at = now()');
  else {
    params.push(to);
    sets.push(`status = $${params.length}`);
  }
  const [row] = await q.query<FileRow>(
    `UPDATE files SET ${sets.join(', ')}
     WHERE project_id = $1 AND id = $2 AND status = $3 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    params,
  );
  return row;
}

/**
 * Fails up to `limit` uploads never confirmed within their URL lifetime plus `graceSeconds`
 * (`uploading` → `failed`, upload_abandoned), skipping those under legal hold; answers their objects.
 */
export async function failAbandonedUploads(
  q: Queryable,
  graceSeconds: number,
  limit: number,
): Promise<{ id: string; storage_key: string }[]> {
  checkTransition('uploading', 'failed');
  return q.query(
    `UPDATE files SET status = 'failed', failure_reason = 'upload_abandoned', upload_expires_at = NULL, updated_at = now()
     WHERE id IN (
       SELECT id FROM files WHERE status = 'uploading' AND deleted_at IS NULL AND NOT legal_hold
         AND upload_expires_at < now() - make_interval(secs => $1)
       LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING id, storage_key`,
    [graceSeconds, limit],
  );
}

/** Up to `limit` files deleted longer than `graceSeconds` ago whose objects are not collected yet. */
export function deletedUncollected(
  q: Queryable,
  graceSeconds: number,
  limit: number,
): Promise<{ id: string; storage_key: string }[]> {
  return q.query(
    `SELECT id, storage_key FROM files
     WHERE deleted_at IS NOT NULL AND purged_at IS NULL AND deleted_at < now() - make_interval(secs => $1)
     ORDER BY deleted_at LIMIT $2`,
    [graceSeconds, limit],
  );
}

/** Marks a file whose upload failed before its bytes were kept (its parts released) as holding none. */
export async function markFailedUploadCollected(q: Queryable, fileId: string): Promise<void> {
  await q.query(
    "UPDATE files SET purged_at = now() WHERE id = $1 AND status = 'failed' AND purged_at IS NULL",
    [fileId],
  );
}

/** Marks the files whose objects were all removed. */
export async function markCollected(q: Queryable, ids: string[]): Promise<void> {
  await q.query('UPDATE files SET purged_at = now() WHERE id = ANY($1::text[])', [ids]);
}

/** Whether a file still waits for the bytes of `key` (an upload URL not confirmed, an open multipart upload). */
export async function isUploadingTo(q: Queryable, key: string): Promise<boolean> {
  const rows = await q.query("SELECT 1 FROM files WHERE storage_key = $1 AND status = 'uploading'", [key]);
  return rows.length > 0;
}

export interface FileFilters {
  folderId?: string | null;
  q?: string;
  tags?: string[];
  category?: string;
  status?: string;
  dateFrom?: Date;
  dateTo?: Date;
  sizeMin?: number;
  sizeMax?: number;
  metadata?: Record<string, unknown>;
  uploadTokenId?: string;
}

/**
 * A file's id is made (on the server's clock) just before its row (created_at, on the database's): a
 * file created by a date has an id made by then, give or take this much clock difference.
 */
const ID_CLOCK_SLACK_MS = 86_400_000;

function likeEscape(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function filterSql(projectId: string, filters: FileFilters): { where: string[]; params: unknown[] } {
  const params: unknown[] = [projectId];
  const where = ['project_id = $1', 'deleted_at IS NULL'];
  const add = (sql: (p: string) => string, value: unknown) => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if (filters.folderId === null) where.push('folder_id IS NULL');
  else if (filters.folderId !== undefined) add((p) => `folder_id = ${p}`, filters.folderId);
  if (filters.q) add((p) => `lower(filename) LIKE ${p}`, `%${likeEscape(filters.q.toLowerCase())}%`);
  if (filters.tags?.length) add((p) => `tags @> ${p}::text[]`, filters.tags);
  if (filters.category) add((p) => `category = ${p}`, filters.category);
  if (filters.status) add((p) => `status = ${p}`, filters.status);
  if (filters.dateFrom) add((p) => `created_at >= ${p}`, filters.dateFrom);
  if (filters.dateTo) add((p) => `created_at <= ${p}`, filters.dateTo);
  if (filters.sizeMin !== undefined) add((p) => `size_bytes >= ${p}`, filters.sizeMin);
  if (filters.sizeMax !== undefined) add((p) => `size_bytes <= ${p}`, filters.sizeMax);
  if (filters.metadata) add((p) => `metadata @> ${p}::jsonb`, JSON.stringify(filters.metadata));
  if (filters.uploadTokenId) add((p) => `upload_token_id = ${p}`, filters.uploadTokenId);
  return { where, params };
}

/** Up to this many matches, a search's page is taken from all its matches, found through its indexes. */
const FEW_MATCHES = 5000;

/** Deltas a project may gather before a listing folds them into its counts (a fold costs about a page). */
const FOLD_AFTER = 1000;

/** The distinct tags a listing is filtered by, when they are its only filter ('' is no tag kept). */
function onlyTags({ tags, ...others }: FileFilters): string[] | undefined {
  if (!tags?.length || tags.includes('')) return undefined;
  return Object.values(others).every((value) => value === undefined) ? [...new Set(tags)] : undefined;
}

/**
 * Whether the total of a listing is kept with every change (migrations 013 and 021), not counted:
 * filtered by status, category and folder at most, or by tags alone.
 */
function countsKept(filters: FileFilters): boolean {
  const { folderId, status, category, tags, ...others } = filters;
  if (tags?.length) return onlyTags(filters) !== undefined;
  return Object.values(others).every((value) => value === undefined);
}

/** Folds the project's kept changes into its counts once a listing found more than FOLD_AFTER of them. */
async function foldWhenMany(q: Queryable, projectId: string, deltas: number): Promise<void> {
  if (deltas > FOLD_AFTER) await q.query('SELECT fold_file_counts($1)', [projectId]);
}

/** The kept total of files holding every one of several tags: the sum over the tag sets holding them. */
async function keptTagSetTotal(q: Queryable, projectId: string, tags: string[]): Promise<number> {
  const [row] = await q.query<{ total: number; deltas: number }>(
    `SELECT ((SELECT coalesce(sum(n), 0) FROM file_tag_set_counts WHERE project_id = $1 AND tags @> $2::text[])
         + coalesce(sum(n) FILTER (WHERE tags @> $2::text[]), 0))::int8 AS total,
       count(*)::int8 AS deltas
     FROM file_tag_set_deltas WHERE project_id = $1`,
    [projectId, tags],
  );
  await foldWhenMany(q, projectId, row!.deltas);
  return row!.total;
}

/** The kept total of a listing for which countsKept(filters). */
async function keptTotal(q: Queryable, projectId: string, filters: FileFilters): Promise<number> {
  const { folderId, status, category } = filters;
  const tags = onlyTags(filters);
  if (tags && tags.length > 1) return keptTagSetTotal(q, projectId, tags);
  const tag = tags?.[0];
  const params: unknown[] = [projectId];
  const where = ['project_id = $1'];
  const add = (column: string, value: string) => {
    params.push(value);
    where.push(`${column} = $${params.length}`);
  };
  add('tag', tag ?? '');
  if (status) add('status', status);
  if (category) add('category', category);
  if (folderId !== undefined) add('folder', folderId ?? '');
  const match = where.join(' AND ');
  // Over every folder, the folded counts' rows that sum them ('*'); the deltas are of one folder each.
  const folded = tag === undefined && folderId === undefined ? `${match} AND folder = '*'` : match;
  const [row] = await q.query<{ total: number; deltas: number }>(
    `SELECT coalesce(sum(n), 0)::int8 AS total, count(*) FILTER (WHERE delta)::int8 AS deltas FROM (
       SELECT n, false AS delta FROM file_counts WHERE ${folded}
       UNION ALL
       SELECT n, true FROM file_count_deltas WHERE ${match}
     ) AS kept`,
    params,
  );
  await foldWhenMany(q, projectId, row!.deltas);
  return row!.total;
}

/** One page, newest first, plus the count of every match (pagination aside). */
export async function listFiles(
  q: Queryable,
  projectId: string,
  filters: FileFilters,
  page: { limit: number; offset: number; cursor?: string },
): Promise<{ rows: FileRow[]; total: number }> {
  const { where, params } = filterSql(projectId, filters);
  const pageWhere = [...where];
  const pageParams = [...params];
  if (page.cursor !== undefined) {
    pageParams.push(page.cursor);
    pageWhere.push(`id < $${pageParams.length}`);
  }
  if (filters.dateTo) {
    // Newest first from the end of the range, not from the newest file.
    pageParams.push(idBound('file', new Date(filters.dateTo.getTime() + ID_CLOCK_SLACK_MS), 'last'));
    pageWhere.push(`id <= $${pageParams.length}`);
  }
  pageParams.push(page.limit + 1);
  const limit = `$${pageParams.length}`;
  let skip = '';
  if (page.cursor === undefined && page.offset > 0) {
    pageParams.push(page.offset);
    skip = ` OFFSET $${pageParams.length}`;
  }
  const matching = `SELECT id FROM files WHERE ${pageWhere.join(' AND ')}`;
  // The rows skipped are found by id alone (from an index, without reading them); only the page is read.
  const pageOf = (ids: string) =>
    q.query<FileRow>(
      `SELECT ${COLUMNS} FROM files WHERE id IN (${ids} ORDER BY id DESC LIMIT ${limit}${skip}) ORDER BY id DESC`,
      pageParams,
    );
  const newestFirst = () => pageOf(matching);
  if (countsKept(filters)) {
    const [rows, total] = await Promise.all([newestFirst(), keptTotal(q, projectId, filters)]);
    return { rows, total };
  }
  // Counted first: the planner cannot tell how many files a search matches, and walking every file
  // newest first for the few that match took a second at a million files. A search of few matches
  // finds them all through its indexes (OFFSET 0 keeps the LIMIT out of that plan), then sorts them.
  const [{ total }] = (await q.query<{ total: number }>(
    `SELECT count(*)::int8 AS total FROM files WHERE ${where.join(' AND ')}`,
    params,
  )) as [{ total: number }];
  const rows = await (total <= FEW_MATCHES
    ? pageOf(`SELECT id FROM (${matching} OFFSET 0) AS found`)
    : newestFirst());
  return { rows, total };
}

/** Records the SHA-256 of an object once Coffer has read it, on every file that holds it without one. */
export async function setChecksum(q: Queryable, storageKey: string, sha256: string): Promise<void> {
  await q.query('UPDATE files SET checksum_sha256 = $2 WHERE storage_key = $1 AND checksum_sha256 IS NULL', [
    storageKey,
    sha256,
  ]);
}

/** An object no file refers to any more (content replaced without versioning): collected after the grace period. */
export async function retireObject(q: Queryable, projectId: string, storageKey: string): Promise<void> {
  await q.query(
    'INSERT INTO retired_objects (storage_key, project_id) VALUES ($1, $2) ON CONFLICT (storage_key) DO NOTHING',
    [storageKey, projectId],
  );
}

/** Up to `limit` objects retired longer than `graceSeconds` ago. */
export async function retiredUncollected(
  q: Queryable,
  graceSeconds: number,
  limit: number,
): Promise<string[]> {
  const rows = await q.query<{ storage_key: string }>(
    `SELECT storage_key FROM retired_objects WHERE retired_at < now() - make_interval(secs => $1)
     ORDER BY retired_at LIMIT $2`,
    [graceSeconds, limit],
  );
  return rows.map((row) => row.storage_key);
}

export async function forgetRetired(q: Queryable, storageKeys: string[]): Promise<void> {
  await q.query('DELETE FROM retired_objects WHERE storage_key = ANY($1::text[])', [storageKeys]);
}
