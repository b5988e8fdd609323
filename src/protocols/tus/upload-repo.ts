import type { Queryable } from '../../infra/db.ts';
import type { FileRow } from '../../modules/files/repo.ts';
import {
  SESSION_AND_FILE_COLUMNS,
  type SessionRow,
  sessionAndFileOf,
} from '../../modules/uploads/session-repo.ts';

/** The only writer of tus_uploads: what a tus upload holds beside its file and multipart session. */
export interface StoredPart {
  part_number: number;
  etag: string;
  size: number;
}

/** Bytes waiting for the next part: a small object of the store. */
export interface TailPiece {
  key: string;
  size: number;
}

export interface TusUploadRow {
  id: string;
  project_id: string;
  file_id: string;
  session_id: string | null;
  created_by: string;
  upload_length: number | null;
  upload_offset: number;
  parts: StoredPart[];
  next_part: number;
  tail: TailPiece[];
  metadata: string | null;
}

/** The columns of a TusUploadRow, of the upload aliased `u`. */
const UPLOAD_COLUMNS = [
  'id',
  'project_id',
  'file_id',
  'session_id',
  'created_by',
  'upload_length',
  'upload_offset',
  'parts',
  'next_part',
  'tail',
  'metadata',
]
  .map((column) => `u.${column}`)
  .join(', ');

export async function insertUpload(
  q: Queryable,
  upload: Pick<
    TusUploadRow,
    | 'id'
    | 'project_id'
    | 'file_id'
    | 'session_id'
    | 'created_by'
    | 'upload_length'
    | 'upload_offset'
    | 'metadata'
  >,
): Promise<void> {
  await q.query(
    `INSERT INTO tus_uploads (id, project_id, file_id, session_id, created_by, upload_length, upload_offset, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      upload.id,
      upload.project_id,
      upload.file_id,
      upload.session_id,
      upload.created_by,
      upload.upload_length,
      upload.upload_offset,
      upload.metadata,
    ],
  );
}

/**
 * The upload with its multipart session and that session's file (its own file when written at once,
 * with no session), in one statement: what a request checks before it touches the upload. The
 * session's and the file's tables, which their modules write, are only read.
 */
export async function findUploadWithSession(
  q: Queryable,
  projectId: string,
  id: string,
): Promise<{ upload: TusUploadRow; session: SessionRow | undefined; file: FileRow | undefined } | undefined> {
  const [row] = await q.query<Record<string, unknown>>(
    `SELECT ${UPLOAD_COLUMNS}, ${SESSION_AND_FILE_COLUMNS}
     FROM tus_uploads u
     LEFT JOIN multipart_sessions s ON s.project_id = u.project_id AND s.id = u.session_id
     LEFT JOIN files f ON f.project_id = u.project_id AND f.id = coalesce(s.file_id, u.file_id)
     WHERE u.project_id = $1 AND u.id = $2`,
    [projectId, id],
  );
  if (!row) return undefined;
  const { session, file, rest } = sessionAndFileOf(row);
  return { upload: rest as unknown as TusUploadRow, session, file };
}

/**
 * How long, in seconds, a lock's holder has before it counts as gone (see lock.ts). A holder records
 * its progress only when it renews, so one that stopped renewing is also stalled: silent covers a
 * process that died.
 */
export interface LockTimes {
  /** Without a byte received: its client went away. */
  stall: number;
  /** Without renewal, stalled: its process is gone or cannot answer. */
  silent: number;
  /** Asked to let go, stalled: it does not. */
  handover: number;
}

/**
 * Whether the holder of `u`'s lock is stalled and past asking (silent, or asked long enough ago), with
 * the stall, silent and handover times as the parameters $2, $3 and $4.
 */
const PAST_ASKING = `(u.progress_at < now() - make_interval(secs => $2)
  AND (u.locked_at < now() - make_interval(secs => $3) OR u.release_wanted_at < now() - make_interval(secs => $4)))`;

/**
 * Takes the upload's lock for `lockId` when it is free (one held by a holder past asking is freed by
 * askRelease, the one rule for a dead holder). Answers the upload as locked, or nothing when it is held.
 */
export async function acquireLock(
  q: Queryable,
  id: string,
  lockId: string,
): Promise<TusUploadRow | undefined> {
  const [row] = await q.query<TusUploadRow>(
    `UPDATE tus_uploads u SET lock_id = $2, locked_at = now(), progress_at = now(), release_wanted_at = NULL
     WHERE u.id = $1 AND u.lock_id IS NULL
     RETURNING ${UPLOAD_COLUMNS}`,
    [id, lockId],
  );
  return row;
}

/**
 * Renews the lease of `lockId` (and its progress when bytes arrived): 'asked' when a request asked it
 * to let go of its upload, nothing when it was taken.
 */
export async function renewLock(
  q: Queryable,
  id: string,
  lockId: string,
  progressed: boolean,
): Promise<'held' | 'asked' | undefined> {
  const [row] = await q.query<{ asked: boolean }>(
    `UPDATE tus_uploads SET locked_at = now(),
       progress_at = CASE WHEN $3 THEN now() ELSE progress_at END
     WHERE id = $1 AND lock_id = $2 RETURNING release_wanted_at IS NOT NULL AS asked`,
    [id, lockId, progressed],
  );
  return row && (row.asked ? 'asked' : 'held');
}

export async function releaseLock(q: Queryable, id: string, lockId: string): Promise<void> {
  await q.query('UPDATE tus_uploads SET lock_id = NULL WHERE id = $1 AND lock_id = $2', [id, lockId]);
}

/**
 * The holder `lockId` lets go of its own accord (its body was cut: it stores what it received, then
 * releases the upload): a HEAD or PATCH then waits for that, as for a holder it asked (askRelease).
 */
export async function announceRelease(q: Queryable, id: string, lockId: string): Promise<void> {
  await q.query(
    'UPDATE tus_uploads SET release_wanted_at = coalesce(release_wanted_at, now()) WHERE id = $1 AND lock_id = $2',
    [id, lockId],
  );
}

/**
 * Asks the stalled holder of the upload's lock to let go (it stores the bytes of its part in flight,
 * then releases the lock), or frees the lock of one past asking, skipping a part number, so that a
 * late part of a holder that may still write can never replace the next holder's. 'asked' while a holder has been asked and still holds the lock, 'freed' when
 * this freed it, nothing when no holder is stalled or asked. Whether it is past asking is read from
 * the row the statement updates, never from a second read of the table: one the holder renewed
 * meanwhile (PostgreSQL rechecks such a row after the renewal) is judged as renewed.
 */
export async function askRelease(
  q: Queryable,
  id: string,
  times: LockTimes,
): Promise<'asked' | 'freed' | undefined> {
  const [row] = await q.query<{ freed: boolean }>(
    `UPDATE tus_uploads u SET
       lock_id = CASE WHEN ${PAST_ASKING} THEN NULL ELSE u.lock_id END,
       next_part = u.next_part + CASE WHEN ${PAST_ASKING} THEN 1 ELSE 0 END,
       release_wanted_at = CASE WHEN ${PAST_ASKING} THEN NULL ELSE coalesce(u.release_wanted_at, now()) END
     WHERE u.id = $1 AND u.lock_id IS NOT NULL
       AND (u.progress_at < now() - make_interval(secs => $2) OR u.release_wanted_at IS NOT NULL)
     RETURNING u.lock_id IS NULL AS freed`,
    [id, times.stall, times.silent, times.handover],
  );
  return row && (row.freed ? 'freed' : 'asked');
}

/**
 * Records what a PATCH stored, while `lockId` still holds the upload at `fromOffset`: the new
 * offset, the part it wrote (if any), the tail after it, and the length once it is known; the lock
 * is released with it when this was the PATCH's last write (`release`). False when the lock was taken meanwhile (nothing is recorded then).
 */
export async function recordProgress(
  q: Queryable,
  id: string,
  lockId: string,
  fromOffset: number,
  progress: { offset: number; part?: StoredPart; tail: TailPiece[]; length: number | null; release: boolean },
): Promise<boolean> {
  const rows = await q.query(
    `UPDATE tus_uploads SET upload_offset = $4, tail = $5::jsonb, upload_length = $6,
       lock_id = CASE WHEN $8 THEN NULL ELSE lock_id END,
       parts = CASE WHEN $7::jsonb IS NULL THEN parts ELSE parts || $7::jsonb END,
       next_part = CASE WHEN $7::jsonb IS NULL THEN next_part ELSE next_part + 1 END
     WHERE id = $1 AND lock_id = $2 AND upload_offset = $3 RETURNING id`,
    [
      id,
      lockId,
      fromOffset,
      progress.offset,
      JSON.stringify(progress.tail),
      progress.length,
      progress.part ? JSON.stringify([progress.part]) : null,
      progress.release,
    ],
  );
  return rows.length > 0;
}

/** Forgets a finished upload (its file stays): answers the bytes still waiting, or nothing when it was gone. */
export async function deleteUpload(
  q: Queryable,
  projectId: string,
  id: string,
): Promise<TailPiece[] | undefined> {
  const [row] = await q.query<{ tail: TailPiece[] }>(
    'DELETE FROM tus_uploads WHERE project_id = $1 AND id = $2 RETURNING tail',
    [projectId, id],
  );
  return row?.tail;
}

/** Sets a deferred length (PATCH with Upload-Length) while it is still unknown. */
export async function setLength(q: Queryable, id: string, length: number): Promise<void> {
  await q.query('UPDATE tus_uploads SET upload_length = $2 WHERE id = $1 AND upload_length IS NULL', [
    id,
    length,
  ]);
}

/**
 * Takes the waiting bytes of up to `limit` uploads whose session ended (terminated, expired, or
 * completed by a PATCH that could not record it) while bytes still waited: answers their objects,
 * for the caller to retire in the same transaction.
 */
export async function takeEndedTails(
  q: Queryable,
  limit: number,
): Promise<{ id: string; project_id: string; tail: TailPiece[] }[]> {
  const rows = await q.query<{ id: string; project_id: string; tail: TailPiece[] }>(
    `SELECT u.id, u.project_id, u.tail FROM tus_uploads u JOIN multipart_sessions s ON s.id = u.session_id
     WHERE u.tail <> '[]' AND s.status IN ('aborted', 'expired', 'completed')
     LIMIT $1 FOR UPDATE OF u SKIP LOCKED`,
    [limit],
  );
  if (rows.length > 0) {
    await q.query(`UPDATE tus_uploads SET tail = '[]' WHERE id = ANY($1::text[])`, [
      rows.map((row) => row.id),
    ]);
  }
  return rows;
}
