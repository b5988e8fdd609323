import { randomUUID } from 'node:crypto';
import type { Queryable } from '../db.ts';

/**
 * What a claim returns of every row, whatever the queue: the columns a queue table must have
 * (`id`, `attempts`, `lease_token`, `last_error`, `failing_since`, `traceparent`) as the runner needs them.
 */
export interface Claimed<Kind extends string = string> {
  id: string;
  /** Which handler runs it. */
  kind: Kind;
  /** Claims so far, this one included: a claim counts an attempt, whether or not it ends well. */
  attempts: number;
  /** This claim's lease: the row is this worker's only while it still holds the token. */
  lease_token: string;
  /** All attempts were used before this claim (queues with maxAttempts): it must not run again. */
  exhausted: boolean;
  /** How long the row has been failing without a break, as of the claim; null when it has not failed. */
  failing_seconds: number | null;
  /** The trace the row's work continues (W3C traceparent of what queued it); null when untraced. */
  traceparent: string | null;
}

/** Adds a parameter to a statement and returns its placeholder. */
export type Param = (value: unknown) => string;

/**
 * How a table serves as a queue: the SQL fragments the jobs module fills into its statements.
 * Fragments refer to the queue's row as `c`. `J` is the row type a claim returns.
 */
export interface QueueTable<J extends Claimed = Claimed> {
  /** Names the queue in log lines and depth reports. */
  readonly name: string;
  readonly table: string;
  /** The column holding when the row is next due: a claim pushes it forward by the lease, a retry by its delay. */
  readonly due: string;
  /** An expression of the row's kind: a column, or a constant for a queue of one kind. */
  readonly kind: string;
  /** Which rows wait for work at all, beside being due (e.g. a status); true when absent. */
  readonly waiting?: (param: Param) => string;
  /** What a claim returns beside the Claimed columns: columns of `c` and of the tables `join` adds. */
  readonly select?: string;
  readonly join?: string;
  /** A row claimed this often is `exhausted`: handed to its handler's `exhausted`, never run again. */
  readonly maxAttempts?: number;
  /** The column holding when a row was queued, if the table keeps it: gives QueueDepth.oldest_seconds. */
  readonly created?: string;
  /** Type only: the row a claim returns. */
  readonly row?: J;
}

/** The row was claimed by another worker since (this worker's lease ran out), or is gone. */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
}

/** Numbered parameters for one statement, `$1` on. */
function parameters(): { values: unknown[]; param: Param } {
  const values: unknown[] = [];
  return {
    values,
    param: (value) => {
      values.push(value);
      return `$${values.length}`;
    },
  };
}

/** The condition on rows waiting for work, with its parameters added. */
function waitingRows(queue: QueueTable<Claimed>, param: Param): string {
  return queue.waiting ? `(${queue.waiting(param)})` : 'true';
}

/**
 * Claims up to `limit` due rows of `kinds`, each leased to this worker for `leaseSeconds` (its due
 * time pushed forward, its attempts counted, a new lease token set). FOR UPDATE SKIP LOCKED lets any
 * number of workers claim at once without taking the same row; a row whose lease ran out is due again.
 */
export async function claim<J extends Claimed>(
  db: Queryable,
  queue: QueueTable<J>,
  options: { kinds: readonly string[]; limit: number; leaseSeconds: number },
): Promise<J[]> {
  if (options.kinds.length === 0 || options.limit <= 0) return [];
  const { values, param } = parameters();
  const lease = param(options.leaseSeconds);
  const token = param(randomUUID());
  const max = param(queue.maxAttempts ?? null);
  const due = queue.due;
  // The sub-select names the rows and their attempts before the claim (a spent row is not counted again).
  const rows = await db.query<J>(
    `WITH c AS (
       UPDATE ${queue.table} t SET ${due} = now() + make_interval(secs => ${lease}), lease_token = ${token},
         attempts = CASE WHEN s.attempts >= ${max}::int4 THEN t.attempts ELSE t.attempts + 1 END
       FROM (
         SELECT c.id, c.attempts FROM ${queue.table} c
         WHERE c.${due} <= now() AND ${queue.kind} = ANY (${param(options.kinds)}::text[])
           AND ${waitingRows(queue, param)}
         ORDER BY c.${due} LIMIT ${param(options.limit)} FOR UPDATE SKIP LOCKED
       ) s
       WHERE t.id = s.id
       RETURNING t.*, coalesce(s.attempts >= ${max}::int4, false) AS exhausted
     )
     SELECT c.id, ${queue.kind} AS kind, c.attempts, c.lease_token, c.exhausted, c.traceparent,
       extract(epoch FROM now() - c.failing_since)::float8 AS failing_seconds
       ${queue.select ? `, ${queue.select}` : ''}
     FROM c ${queue.join ?? ''}`,
    values,
  );
  return rows;
}

export interface Lease {
  id: string;
  lease_token: string;
}

/** Pushes the due time of rows still leased with their tokens forward by `leaseSeconds`; returns the ids renewed. */
export async function renew(
  db: Queryable,
  queue: QueueTable<Claimed>,
  leases: readonly Lease[],
  leaseSeconds: number,
): Promise<Set<string>> {
  const rows = await db.query<{ id: string }>(
    `UPDATE ${queue.table} t SET ${queue.due} = now() + make_interval(secs => $3)
     FROM unnest($1::text[], $2::text[]) AS h (id, token)
     WHERE t.id = h.id AND t.lease_token = h.token
     RETURNING t.id`,
    [leases.map((lease) => lease.id), leases.map((lease) => lease.lease_token), leaseSeconds],
  );
  return new Set(rows.map((row) => row.id));
}

/**
 * Gives a leased row back to be tried again after `delaySeconds`, noting why it failed and since
 * when it has been failing. False when the lease was lost meanwhile (nothing written).
 */
export async function release(
  q: Queryable,
  queue: QueueTable<Claimed>,
  lease: Lease,
  delaySeconds: number,
  error: string,
): Promise<boolean> {
  const rows = await q.query(
    `UPDATE ${queue.table} SET ${queue.due} = now() + make_interval(secs => $3), lease_token = NULL,
       last_error = $4, failing_since = coalesce(failing_since, now())
     WHERE id = $1 AND lease_token = $2 RETURNING id`,
    [lease.id, lease.lease_token, delaySeconds, error.slice(0, 2000)],
  );
  return rows.length > 0;
}

/** A queue's work as it stands, per kind: for metrics and operators. */
export interface QueueDepth {
  kind: string;
  /** Due and waiting for a worker (including rows whose worker died: their lease ran out). */
  due: number;
  /** Leased to a worker that is renewing its lease. */
  running: number;
  /** Waiting for a later time: a retry's backoff, a delayed first attempt, a periodic task's next run. */
  scheduled: number;
  /** How long the longest-due row has been waiting; null when none is due. */
  oldest_due_seconds: number | null;
  /** Age of the oldest row (due, running or scheduled) since it was queued; null when the queue keeps no `created`. */
  oldest_seconds: number | null;
}

export async function queueDepth(db: Queryable, queue: QueueTable<Claimed>): Promise<QueueDepth[]> {
  const { values, param } = parameters();
  const due = `c.${queue.due}`;
  const created = queue.created ? `c.${queue.created}` : undefined;
  return db.query<QueueDepth>(
    `SELECT ${queue.kind} AS kind,
       count(*) FILTER (WHERE ${due} <= now())::int4 AS due,
       count(*) FILTER (WHERE ${due} > now() AND c.lease_token IS NOT NULL)::int4 AS running,
       count(*) FILTER (WHERE ${due} > now() AND c.lease_token IS NULL)::int4 AS scheduled,
       extract(epoch FROM now() - min(${due}) FILTER (WHERE ${due} <= now()))::float8 AS oldest_due_seconds,
       ${created ? `extract(epoch FROM now() - min(${created}))::float8` : 'NULL::float8'} AS oldest_seconds
     FROM ${queue.table} c WHERE ${waitingRows(queue, param)} GROUP BY 1 ORDER BY 1`,
    values,
  );
}
