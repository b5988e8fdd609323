import type { Queryable } from '../../infra/db.ts';
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

/** Marks a file whose upload failed before its bytes were kept (its parts released) as holding none. */
export async function markFailedUploadCollected(q: Queryable, fileId: string): Promise<void> {
  await q.query(
    "UPDATE files SET purged_at = now() WHERE id = $1 AND status = 'failed' AND purged_at IS NULL",
    [fileId],
  );
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
