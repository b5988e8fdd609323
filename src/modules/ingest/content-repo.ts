import type { Queryable } from '../../infra/db.ts';
import { type ContentChecksum, type HttpHeaders, jsonOrNull } from '../files/repo.ts';

/** New bytes of an existing file on their way to becoming its current content (a new version). */
export type ContentStatus = 'uploading' | 'processing' | 'committed' | 'failed' | 'quarantined';

/**
 * The life of new content, as FILE_TRANSITIONS is the file's: it is committed (becomes the file's
 * content) at confirm, or after a clean scan; failed when abandoned, rejected, or its file is gone.
 */
const CONTENT_TRANSITIONS: Readonly<Record<ContentStatus, readonly ContentStatus[]>> = {
  uploading: ['processing', 'committed', 'failed'],
  processing: ['committed', 'failed', 'quarantined'],
  committed: [],
  failed: [],
  quarantined: [],
};

export interface PendingContent {
  id: string;
  project_id: string;
  file_id: string;
  storage_key: string;
  size_bytes: number;
  content_type: string;
  checksum_sha256: string | null;
  etag: string | null;
  status: ContentStatus;
  failure_reason: string | null;
  /** The file's metadata once this content is current; null keeps the file's own. */
  metadata: Record<string, unknown> | null;
  /** The headers S3 stores with this content, which become the file's with it; null for none. */
  http_headers: HttpHeaders | null;
  /** The checksum an S3 write sent with this content, which becomes the file's with it; null for none. */
  client_checksum: ContentChecksum | null;
}

const COLUMNS =
  'id, project_id, file_id, storage_key, size_bytes, content_type, checksum_sha256, etag, status, failure_reason, metadata, http_headers, client_checksum';

function checkTransition(from: ContentStatus, to: ContentStatus): void {
  if (!CONTENT_TRANSITIONS[from].includes(to)) throw new Error(`Content cannot go from ${from} to ${to}`);
}

export async function insertContent(
  q: Queryable,
  content: Pick<
    PendingContent,
    'id' | 'project_id' | 'file_id' | 'storage_key' | 'size_bytes' | 'content_type'
  > & {
    upload_expires_at: Date;
    metadata?: Record<string, unknown>;
    http_headers?: HttpHeaders | null;
    client_checksum?: ContentChecksum | null;
  },
): Promise<void> {
  await q.query(
    `INSERT INTO pending_contents (id, project_id, file_id, storage_key, size_bytes, content_type, upload_expires_at,
       metadata, http_headers, client_checksum)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb)`,
    [
      content.id,
      content.project_id,
      content.file_id,
      content.storage_key,
      content.size_bytes,
      content.content_type,
      content.upload_expires_at,
      content.metadata === undefined ? null : JSON.stringify(content.metadata),
      jsonOrNull(content.http_headers),
      jsonOrNull(content.client_checksum),
    ],
  );
}

/** The size of uploading content declared without one (its parts' total), learned at completion. */
export async function settleContentSize(q: Queryable, id: string, size: number): Promise<void> {
  await q.query("UPDATE pending_contents SET size_bytes = $2 WHERE id = $1 AND status = 'uploading'", [
    id,
    size,
  ]);
}

export async function findContent(
  q: Queryable,
  fileId: string,
  id: string,
): Promise<PendingContent | undefined> {
  const [row] = await q.query<PendingContent>(
    `SELECT ${COLUMNS} FROM pending_contents WHERE file_id = $1 AND id = $2`,
    [fileId, id],
  );
  return row;
}

/**
 * Moves content from `from` to `to` with `changes`, only while it is still in `from`: undefined
 * when a concurrent change came first.
 */
export async function transitionContent(
  q: Queryable,
  id: string,
  from: ContentStatus,
  to: ContentStatus,
  changes: Partial<Pick<PendingContent, 'checksum_sha256' | 'etag' | 'failure_reason'>> & {
    scan_signature?: string | null;
  } = {},
): Promise<PendingContent | undefined> {
  checkTransition(from, to);
  const params: unknown[] = [id, from, to];
  const sets = ['status = $3', 'updated_at = now()'];
  if (from === 'uploading') sets.push('upload_expires_at = NULL');
  for (const [column, value] of Object.entries(changes)) {
    if (value === undefined) continue;
    params.push(value);
    sets.push(`${column} = $${params.length}`);
  }
  const [row] = await q.query<PendingContent>(
    `UPDATE pending_contents SET ${sets.join(', ')} WHERE id = $1 AND status = $2 RETURNING ${COLUMNS}`,
    params,
  );
  return row;
}

/** Fails content never confirmed within its URL lifetime plus `graceSeconds` (upload_abandoned). */
export async function failAbandonedContents(q: Queryable, graceSeconds: number): Promise<void> {
  checkTransition('uploading', 'failed');
  await q.query(
    `UPDATE pending_contents SET status = 'failed', failure_reason = 'upload_abandoned', updated_at = now()
     WHERE status = 'uploading' AND upload_expires_at < now() - make_interval(secs => $1)`,
    [graceSeconds],
  );
}

/** Up to `limit` contents that never became current, ended longer than `graceSeconds` ago, objects not collected. */
export function rejectedUncollected(
  q: Queryable,
  graceSeconds: number,
  limit: number,
): Promise<{ id: string; storage_key: string }[]> {
  return q.query(
    `SELECT id, storage_key FROM pending_contents
     WHERE status IN ('failed', 'quarantined') AND purged_at IS NULL AND updated_at < now() - make_interval(secs => $1)
     LIMIT $2`,
    [graceSeconds, limit],
  );
}

export async function markContentsCollected(q: Queryable, ids: string[]): Promise<void> {
  await q.query('UPDATE pending_contents SET purged_at = now() WHERE id = ANY($1::text[])', [ids]);
}

/** The objects of every content of these files (current or not), for collecting them with the files. */
export function contentKeysOf(q: Queryable, fileIds: string[]): Promise<{ storage_key: string }[]> {
  return q.query('SELECT storage_key FROM pending_contents WHERE file_id = ANY($1::text[])', [fileIds]);
}

/** Whether new content of the file is stored and waits for its scan, to become its content once clean. */
export async function hasContentInScan(q: Queryable, fileId: string): Promise<boolean> {
  const rows = await q.query(
    "SELECT 1 FROM pending_contents WHERE file_id = $1 AND status = 'processing' LIMIT 1",
    [fileId],
  );
  return rows.length > 0;
}

/**
 * Whether content of the file newer than `contentId` (ids follow the order writes began) is already
 * committed: `contentId` then comes too late to become current.
 */
export async function hasNewerCommitted(q: Queryable, fileId: string, contentId: string): Promise<boolean> {
  const [row] = await q.query<{ newer: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pending_contents WHERE file_id = $1 AND id > $2 AND status = 'committed') AS newer`,
    [fileId, contentId],
  );
  return row!.newer;
}

/** Whether content still waits for the bytes of `key` (an upload URL not confirmed yet). */
export async function isContentUploadingTo(q: Queryable, key: string): Promise<boolean> {
  const rows = await q.query(
    "SELECT 1 FROM pending_contents WHERE storage_key = $1 AND status = 'uploading'",
    [key],
  );
  return rows.length > 0;
}

/** Records the SHA-256 of an object once Coffer has read it, on the contents that hold it. */
export async function setContentChecksum(q: Queryable, storageKey: string, sha256: string): Promise<void> {
  await q.query(
    'UPDATE pending_contents SET checksum_sha256 = $2 WHERE storage_key = $1 AND checksum_sha256 IS NULL',
    [storageKey, sha256],
  );
}
