import { newId } from '../../lib/ids.ts';
import type { Queryable } from '../db.ts';
import { currentTraceparent } from '../spans.ts';
import { type Claimed, type Lease, LeaseLostError, type QueueTable } from './queue.ts';

/**
 * scan: virus scan and type check of new bytes; digest: the SHA-256 of bytes the store did not hash;
 * thumbnail: the renditions a project's `thumbnails` setting asks of an image that became ready.
 */
export type JobKind = 'scan' | 'digest' | 'thumbnail';

/** A job of the `jobs` table: work about one file, queued in the transaction of the change that needs it. */
export interface Job extends Claimed<JobKind> {
  project_id: string;
  file_id: string | null;
  /** New content of the file (not yet current) that the job is about, if any. */
  content_id: string | null;
  /** The object the job is about, when it is fixed at queueing (digest jobs). */
  storage_key: string | null;
}

export const JOBS: QueueTable<Job> = {
  name: 'jobs',
  table: 'jobs',
  due: 'run_at',
  kind: 'c.kind',
  select: 'c.project_id, c.file_id, c.content_id, c.storage_key',
  created: 'created_at',
};

/** Adds a job, which continues the active trace; call it inside the transaction of the change that needs it. */
export async function enqueueJob(
  q: Queryable,
  kind: JobKind,
  projectId: string,
  fileId: string | null,
  contentId: string | null = null,
  storageKey: string | null = null,
): Promise<void> {
  await q.query(
    `INSERT INTO jobs (id, kind, project_id, file_id, content_id, storage_key, traceparent)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [newId('job'), kind, projectId, fileId, contentId, storageKey, currentTraceparent()],
  );
}

/**
 * Removes a finished job, in the transaction that writes its outcome: throws LeaseLostError (and so
 * rolls the outcome back) when this worker no longer holds the job.
 */
export async function completeJob(q: Queryable, job: Lease): Promise<void> {
  const rows = await q.query('DELETE FROM jobs WHERE id = $1 AND lease_token = $2 RETURNING id', [
    job.id,
    job.lease_token,
  ]);
  if (rows.length === 0) throw new LeaseLostError(`job ${job.id}: the lease was lost`);
}
