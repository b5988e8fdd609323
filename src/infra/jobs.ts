import { newId } from '../lib/ids.ts';
import type { Db, Queryable } from './db.ts';

/** scan: virus scan and type check of new bytes; digest: the SHA-256 of bytes the store did not hash. */
export type JobKind = 'scan' | 'digest';

export interface Job {
  id: string;
  kind: JobKind;
  project_id: string;
  file_id: string | null;
  /** New content of the file (not yet current) that the job is about, if any. */
  content_id: string | null;
  /** The object the job is about, when it is fixed at queueing (digest jobs). */
  storage_key: string | null;
  attempts: number;
}

/** Adds a job; call it inside the transaction of the change that needs it. */
export async function enqueueJob(
  q: Queryable,
  kind: JobKind,
  projectId: string,
  fileId: string | null,
  contentId: string | null = null,
  storageKey: string | null = null,
): Promise<void> {
  await q.query(
    'INSERT INTO jobs (id, kind, project_id, file_id, content_id, storage_key) VALUES ($1, $2, $3, $4, $5, $6)',
    [newId('job'), kind, projectId, fileId, contentId, storageKey],
  );
}

/**
 * Claims up to `limit` due jobs. Each is leased for `leaseSeconds` (its run_at pushed forward and
 * its attempts counted): any number of workers can claim at once without taking the same job,
 * and a job whose worker died becomes due again when the lease runs out.
 */
export async function claimJobs(db: Db, kind: JobKind, limit: number, leaseSeconds: number): Promise<Job[]> {
  return db.tx((q) =>
    q.query<Job>(
      `UPDATE jobs SET run_at = now() + make_interval(secs => $3), attempts = attempts + 1
       WHERE id IN (
         SELECT id FROM jobs WHERE kind = $1 AND run_at <= now() ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED
       )
       RETURNING id, kind, project_id, file_id, content_id, storage_key, attempts`,
      [kind, limit, leaseSeconds],
    ),
  );
}

export async function finishJob(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM jobs WHERE id = $1', [id]);
}

export async function retryJob(q: Queryable, id: string, delaySeconds: number, error: string): Promise<void> {
  await q.query('UPDATE jobs SET run_at = now() + make_interval(secs => $2), last_error = $3 WHERE id = $1', [
    id,
    delaySeconds,
    error.slice(0, 1000),
  ]);
}
