import type { Queryable } from '../../infra/db.ts';
import { COLUMNS as FILE_COLUMNS, type FileRow } from '../files/repo.ts';

/** The only writer of multipart_sessions: a REST multipart upload's record, beside its file's. */
export const SESSION_STATUSES = ['open', 'completing', 'completed', 'aborted', 'expired'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

export interface SessionRow {
  id: string;
  project_id: string;
  file_id: string;
  /** The new content of the file the upload makes, when it is not the file's first (S3 over a key that holds one). */
  content_id: string | null;
  store_upload_id: string;
  storage_key: string;
  /** The declared total; with `size_deferred`, the most the upload may hold (its size comes at completion). */
  total_size_bytes: number;
  size_deferred: boolean;
  status: SessionStatus;
  expires_at: Date;
  /** Whether the complete that claimed it holds a condition on what the upload replaces. */
  conditional: boolean;
  /**
   * The tags its writer named (an upload token's merged in), which the file the upload ends in takes
   * with its content when that is not the upload's own new file (new content, or a merge: see settle).
   */
  tags: string[] | null;
  /** Whether it makes a new file at an S3 key, which its completion keeps to one file (see settle). */
  keyed: boolean;
}

const COLUMNS =
  'id, project_id, file_id, content_id, store_upload_id, storage_key, total_size_bytes, size_deferred, status, expires_at, conditional, tags, keyed';

export async function insertSession(
  q: Queryable,
  session: Omit<SessionRow, 'status' | 'conditional'>,
): Promise<void> {
  await q.query(
    `INSERT INTO multipart_sessions (id, project_id, file_id, store_upload_id, storage_key, total_size_bytes,
       size_deferred, expires_at, content_id, tags, keyed)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [
      session.id,
      session.project_id,
      session.file_id,
      session.store_upload_id,
      session.storage_key,
      session.total_size_bytes,
      session.size_deferred,
      session.expires_at,
      session.content_id,
      session.tags,
      session.keyed,
    ],
  );
}

export async function findSession(
  q: Queryable,
  projectId: string,
  id: string,
): Promise<SessionRow | undefined> {
  const [row] = await q.query<SessionRow>(
    `SELECT ${COLUMNS} FROM multipart_sessions WHERE project_id = $1 AND id = $2`,
    [projectId, id],
  );
  return row;
}

/** A session and its file, undefined when gone. */
export interface SessionAndFile {
  session: SessionRow;
  file: FileRow | undefined;
  /** The key S3 shows the file at (findSessionAndFile reads it; a protocol's own row may not). */
  key?: string | null;
}

/** The prefixes of a session's and its file's columns read with others in one statement. */
const SESSION_PREFIX = 's__';
const FILE_PREFIX = 'f__';
const fieldsOf = (columns: string) => columns.split(',').map((column) => column.trim());

/**
 * The columns of a session `s` and its file `f`, for a statement that reads them, maybe with others
 * (a protocol's own row joined with its session): prefixed, and read back by sessionAndFileOf.
 */
export const SESSION_AND_FILE_COLUMNS = [
  ...fieldsOf(COLUMNS).map((field) => `s.${field} AS ${SESSION_PREFIX}${field}`),
  ...fieldsOf(FILE_COLUMNS).map((field) => `f.${field} AS ${FILE_PREFIX}${field}`),
].join(', ');

/**
 * The session and the file of a row read with SESSION_AND_FILE_COLUMNS (each undefined when its
 * outer join found none), and the row's other columns.
 */
export function sessionAndFileOf(row: Record<string, unknown>): {
  session: SessionRow | undefined;
  file: FileRow | undefined;
  rest: Record<string, unknown>;
} {
  const session: Record<string, unknown> = {};
  const file: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(row)) {
    if (name.startsWith(SESSION_PREFIX)) session[name.slice(SESSION_PREFIX.length)] = value;
    else if (name.startsWith(FILE_PREFIX)) file[name.slice(FILE_PREFIX.length)] = value;
    else rest[name] = value;
  }
  return {
    session: session.id === null ? undefined : (session as unknown as SessionRow),
    file: file.id === null ? undefined : (file as unknown as FileRow),
    rest,
  };
}

/** A session and its file in one round trip (a part's write needs both); the file undefined when gone. */
export async function findSessionAndFile(
  q: Queryable,
  projectId: string,
  id: string,
): Promise<SessionAndFile | undefined> {
  const [row] = await q.query<Record<string, unknown>>(
    `SELECT ${SESSION_AND_FILE_COLUMNS}, f.s3_key AS key
     FROM multipart_sessions s LEFT JOIN files f ON f.project_id = s.project_id AND f.id = s.file_id
     WHERE s.project_id = $1 AND s.id = $2`,
    [projectId, id],
  );
  if (!row) return undefined;
  const { session, file, rest } = sessionAndFileOf(row);
  return { session: session!, file, key: rest.key as string | null };
}

/**
 * Moves a session from `from` to `to` (claimCompleting moves it to `completing`), only while it is
 * still in `from`; false when it was not.
 */
export async function setSessionStatus(
  q: Queryable,
  id: string,
  from: SessionStatus,
  to: Exclude<SessionStatus, 'completing'>,
): Promise<boolean> {
  const finished = to === 'open' ? null : new Date();
  const rows = await q.query(
    'UPDATE multipart_sessions SET status = $3, finished_at = $4 WHERE id = $1 AND status = $2 RETURNING id',
    [id, from, to, finished],
  );
  return rows.length > 0;
}

/**
 * Claims an open session for assembly (`completing`), recording whether its complete is `conditional`;
 * false when it was not open.
 */
export async function claimCompleting(q: Queryable, id: string, conditional: boolean): Promise<boolean> {
  const rows = await q.query(
    `UPDATE multipart_sessions SET status = 'completing', completing_since = now(), conditional = $2
     WHERE id = $1 AND status = 'open' RETURNING id`,
    [id, conditional],
  );
  return rows.length > 0;
}

/**
 * Moves an open session's expiry to `expiresAt` (its upload made progress); false when it is not open,
 * or past its expiry already (expired, though the reaper has not come yet: never revived).
 */
export async function extendSession(q: Queryable, id: string, expiresAt: Date): Promise<boolean> {
  const rows = await q.query(
    `UPDATE multipart_sessions SET expires_at = $2
     WHERE id = $1 AND status = 'open' AND expires_at > now() RETURNING id`,
    [id, expiresAt],
  );
  return rows.length > 0;
}

/** Renews the claim of a session being assembled, while it still is. */
export async function renewCompleting(q: Queryable, id: string): Promise<void> {
  await q.query(
    `UPDATE multipart_sessions SET completing_since = now() WHERE id = $1 AND status = 'completing'`,
    [id],
  );
}

export async function markReleased(q: Queryable, id: string): Promise<void> {
  await q.query('UPDATE multipart_sessions SET store_released_at = now() WHERE id = $1', [id]);
}

/**
 * The part sizes granted so far (part number → bytes), the session locked until the transaction ends,
 * and whether it is still open under the lock (open, unexpired, its file not deleted: what
 * grantOpenPart asks of it too).
 */
export async function lockGrants(
  q: Queryable,
  id: string,
): Promise<{ grants: Record<string, number>; open: boolean }> {
  const [row] = await q.query<{ part_grants: Record<string, number>; open: boolean }>(
    `SELECT part_grants, status = 'open' AND expires_at > now()
              AND EXISTS (SELECT 1 FROM files f WHERE f.id = s.file_id AND f.deleted_at IS NULL) AS open
     FROM multipart_sessions s WHERE id = $1 FOR UPDATE OF s`,
    [id],
  );
  return { grants: row?.part_grants ?? {}, open: row?.open ?? false };
}

export async function recordGrant(q: Queryable, id: string, partNumber: number, size: number): Promise<void> {
  await q.query(
    `UPDATE multipart_sessions SET part_grants = part_grants || jsonb_build_object($2::text, $3::bigint)
     WHERE id = $1`,
    [id, String(partNumber), size],
  );
}

/**
 * Grants part `partNumber` of open, unexpired session `id` of a file not deleted up to `size` bytes in
 * one statement, as lockGrants and recordGrant do in a transaction: a grant never shrinks, and all of
 * them stay within `perDeclaredByte` times the total. False when refused (not open, the file deleted,
 * or the bound): the caller tells why.
 */
export async function grantOpenPart(
  q: Queryable,
  id: string,
  partNumber: number,
  size: number,
  perDeclaredByte: number,
): Promise<boolean> {
  const rows = await q.query(
    `UPDATE multipart_sessions
     SET part_grants = part_grants || jsonb_build_object($2::text, greatest($3::bigint, coalesce((part_grants->>$2::text)::bigint, 0)))
     WHERE id = $1 AND status = 'open' AND expires_at > now() AND $3::bigint <= total_size_bytes
       AND EXISTS (SELECT 1 FROM files f WHERE f.id = multipart_sessions.file_id AND f.deleted_at IS NULL)
       AND (SELECT coalesce(sum(value::bigint), 0) FROM jsonb_each_text(part_grants) WHERE key <> $2::text) + $3::bigint
         <= $4::bigint * total_size_bytes
     RETURNING 1`,
    [id, String(partNumber), size, perDeclaredByte],
  );
  return rows.length === 1;
}

/** Sessions left `completing` longer than `leaseSeconds` without renewal: their process died. */
export function stuckSessions(q: Queryable, leaseSeconds: number): Promise<SessionRow[]> {
  return q.query<SessionRow>(
    `SELECT ${COLUMNS} FROM multipart_sessions
     WHERE status = 'completing' AND completing_since < now() - make_interval(secs => $1) LIMIT 100`,
    [leaseSeconds],
  );
}

/** Open sessions past their expiry; a file under legal hold keeps its parts until the hold is released. */
export function expiredSessions(q: Queryable): Promise<SessionRow[]> {
  return q.query<SessionRow>(
    `SELECT ${COLUMNS} FROM multipart_sessions s
     WHERE status = 'open' AND expires_at <= now()
       AND NOT EXISTS (SELECT 1 FROM files f WHERE f.id = s.file_id AND f.legal_hold)
     ORDER BY expires_at LIMIT 100`,
  );
}

/** Ended sessions whose parts the store still holds (its abort failed at the time). */
export function unreleasedSessions(q: Queryable): Promise<SessionRow[]> {
  return q.query<SessionRow>(
    `SELECT ${COLUMNS} FROM multipart_sessions
     WHERE status IN ('aborted', 'expired') AND store_released_at IS NULL
       AND finished_at < now() - interval '1 minute'
     ORDER BY finished_at LIMIT 100`,
  );
}

/** An open upload as S3's ListMultipartUploads shows it: its file's key, its id, when it began. */
export interface OpenUpload {
  key: string;
  id: string;
  created_at: Date;
}

/**
 * Up to `limit` open uploads of the project whose file's S3 key lies in [`from`, `below`), after
 * (`afterKey`, `afterId`), by key then id. Files are another module's table, read only here. An
 * upload of new content for a file deleted since is none: every call on it answers that it is gone.
 */
export function openUploads(
  q: Queryable,
  projectId: string,
  range: { from: string; below?: string; afterKey: string; afterId: string },
  limit: number,
): Promise<OpenUpload[]> {
  return q.query<OpenUpload>(
    `SELECT f.s3_key AS key, s.id, s.created_at FROM multipart_sessions s JOIN files f ON f.id = s.file_id
     WHERE s.project_id = $1 AND s.status = 'open' AND f.deleted_at IS NULL
       AND f.s3_key >= $2 AND ($3::text IS NULL OR f.s3_key < $3)
       AND (f.s3_key, s.id) > ($4 COLLATE "C", $5 COLLATE "C")
     ORDER BY f.s3_key, s.id LIMIT $6`,
    [projectId, range.from, range.below ?? null, range.afterKey, range.afterId, limit],
  );
}
