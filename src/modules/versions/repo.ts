import type { Queryable } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { type ContentChecksum, type HttpHeaders, jsonOrNull } from '../files/repo.ts';

export interface FileVersion {
  id: string;
  file_id: string;
  version_number: number;
  storage_key: string;
  size_bytes: number;
  content_type: string;
  checksum_sha256: string | null;
  reason: 'upload' | 'restore';
  source_version_id: string | null;
  created_at: string;
}

/** A version as stored: with the ETag, headers and checksum S3 clients see (the REST API shows none). */
export interface StoredVersion extends FileVersion {
  etag: string | null;
  http_headers: HttpHeaders | null;
  client_checksum: ContentChecksum | null;
}

interface Row extends Omit<StoredVersion, 'created_at'> {
  created_at: Date;
}

const COLUMNS =
  'id, file_id, version_number, storage_key, size_bytes, content_type, checksum_sha256, etag, http_headers, client_checksum, reason, source_version_id, created_at';

const toVersion = (row: Row): StoredVersion => ({ ...row, created_at: row.created_at.toISOString() });

export interface Snapshot {
  storage_key: string;
  size_bytes: number;
  content_type: string;
  checksum_sha256: string | null;
  etag?: string | null;
  http_headers?: HttpHeaders | null;
  client_checksum?: ContentChecksum | null;
}

/** Appends the next version of the file (numbers count up from 1). */
export async function recordVersion(
  q: Queryable,
  file: { project_id: string; id: string },
  snapshot: Snapshot,
  reason: 'upload' | 'restore',
  options: { id?: string; sourceVersionId?: string } = {},
): Promise<FileVersion> {
  const [row] = await q.query<Row>(
    `INSERT INTO file_versions (id, project_id, file_id, version_number, storage_key, size_bytes, content_type,
       checksum_sha256, reason, source_version_id, etag, http_headers, client_checksum)
     SELECT $1, $2, $3, coalesce(max(version_number), 0) + 1, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12::jsonb
     FROM file_versions WHERE file_id = $3
     RETURNING ${COLUMNS}`,
    [
      options.id ?? newId('ver'),
      file.project_id,
      file.id,
      snapshot.storage_key,
      snapshot.size_bytes,
      snapshot.content_type,
      snapshot.checksum_sha256,
      reason,
      options.sourceVersionId ?? null,
      snapshot.etag ?? null,
      jsonOrNull(snapshot.http_headers),
      jsonOrNull(snapshot.client_checksum),
    ],
  );
  return toVersion(row!);
}

export async function listVersions(q: Queryable, fileId: string): Promise<StoredVersion[]> {
  const rows = await q.query<Row>(
    `SELECT ${COLUMNS} FROM file_versions WHERE file_id = $1 ORDER BY version_number DESC`,
    [fileId],
  );
  return rows.map(toVersion);
}

export async function findVersion(
  q: Queryable,
  fileId: string,
  versionId: string,
): Promise<StoredVersion | undefined> {
  const [row] = await q.query<Row>(`SELECT ${COLUMNS} FROM file_versions WHERE file_id = $1 AND id = $2`, [
    fileId,
    versionId,
  ]);
  return row && toVersion(row);
}

/** The id of the file's newest version, its current content; undefined when it has none. */
export async function newestVersionId(q: Queryable, fileId: string): Promise<string | undefined> {
  const [row] = await q.query<{ id: string }>(
    'SELECT id FROM file_versions WHERE file_id = $1 ORDER BY version_number DESC LIMIT 1',
    [fileId],
  );
  return row?.id;
}

/** The version before the file's newest, the content it had before its current one; undefined when none. */
export async function versionBeforeNewest(q: Queryable, fileId: string): Promise<StoredVersion | undefined> {
  const [row] = await q.query<Row>(
    `SELECT ${COLUMNS} FROM file_versions WHERE file_id = $1 ORDER BY version_number DESC OFFSET 1 LIMIT 1`,
    [fileId],
  );
  return row && toVersion(row);
}

/** The id of the file's first version (its content as first uploaded); undefined when it has none. */
export async function firstVersionId(q: Queryable, fileId: string): Promise<string | undefined> {
  const [row] = await q.query<{ id: string }>(
    'SELECT id FROM file_versions WHERE file_id = $1 ORDER BY version_number LIMIT 1',
    [fileId],
  );
  return row?.id;
}

/**
 * Removes a version for good; answers its object, and whether it was the last version of the file to
 * hold it (a restore records an earlier object again).
 */
export async function deleteVersion(
  q: Queryable,
  fileId: string,
  versionId: string,
): Promise<{ storage_key: string; last: boolean } | undefined> {
  const [row] = await q.query<{ storage_key: string; last: boolean }>(
    `DELETE FROM file_versions WHERE file_id = $1 AND id = $2
     RETURNING storage_key, NOT EXISTS (
       SELECT 1 FROM file_versions other
       WHERE other.file_id = $1 AND other.storage_key = file_versions.storage_key AND other.id <> $2) AS last`,
    [fileId, versionId],
  );
  return row;
}

export async function hasVersions(q: Queryable, fileId: string): Promise<boolean> {
  return (await q.query('SELECT 1 FROM file_versions WHERE file_id = $1 LIMIT 1', [fileId])).length > 0;
}

/** Records the SHA-256 of an object once Coffer has read it, on the versions that hold it. */
export async function setVersionChecksum(q: Queryable, storageKey: string, sha256: string): Promise<void> {
  await q.query(
    'UPDATE file_versions SET checksum_sha256 = $2 WHERE storage_key = $1 AND checksum_sha256 IS NULL',
    [storageKey, sha256],
  );
}

/** The objects of every version of these files, for collecting them with the files. */
export function versionKeysOf(q: Queryable, fileIds: string[]): Promise<{ storage_key: string }[]> {
  return q.query('SELECT storage_key FROM file_versions WHERE file_id = ANY($1::text[])', [fileIds]);
}
