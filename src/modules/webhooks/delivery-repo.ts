import type { Queryable } from '../../infra/db.ts';
import type { Claimed, Lease, QueueTable } from '../../infra/jobs/index.ts';
import { currentTraceparent } from '../../infra/spans.ts';
import { newId } from '../../lib/ids.ts';
import type { EventType } from '../events/types.ts';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'dead', 'cancelled'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface Delivery {
  id: string;
  webhook_id: string;
  event: EventType;
  event_id: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_response_status: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

interface DeliveryRow extends Omit<Delivery, 'created_at' | 'updated_at' | 'next_attempt_at'> {
  created_at: Date;
  updated_at: Date;
  next_attempt_at: Date;
}

const COLUMNS =
  'id, webhook_id, event, event_id, status, attempts, next_attempt_at, last_response_status, last_error, created_at, updated_at';

const toDelivery = (row: DeliveryRow): Delivery => ({
  ...row,
  // Only a pending delivery has a next attempt; the column keeps its last due time.
  next_attempt_at: row.status === 'pending' ? row.next_attempt_at.toISOString() : null,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

/** The webhook's latest 200 deliveries (of `status` when given), and how many there are in all. */
export async function listDeliveries(
  q: Queryable,
  webhookId: string,
  status: DeliveryStatus | undefined,
): Promise<{ items: Delivery[]; total: number }> {
  // One statement, so that the page and the total are read from the same snapshot while the
  // dispatcher changes statuses (the window count is taken before the LIMIT).
  const rows = await q.query<DeliveryRow & { total: number }>(
    `SELECT ${COLUMNS}, count(*) OVER ()::int8 AS total FROM deliveries
     WHERE webhook_id = $1 AND ($2::text IS NULL OR status = $2)
     ORDER BY id DESC LIMIT 200`,
    [webhookId, status ?? null],
  );
  return { items: rows.map(({ total: _, ...row }) => toDelivery(row)), total: rows[0]?.total ?? 0 };
}

export async function findDeliveryStatus(
  q: Queryable,
  webhookId: string,
  id: string,
): Promise<DeliveryStatus | undefined> {
  const [row] = await q.query<{ status: DeliveryStatus }>(
    'SELECT status FROM deliveries WHERE webhook_id = $1 AND id = $2',
    [webhookId, id],
  );
  return row?.status;
}

/** Makes a finished delivery pending again from its first attempt; undefined when it is pending (or missing). */
export async function restartDelivery(
  q: Queryable,
  webhookId: string,
  id: string,
): Promise<Delivery | undefined> {
  const [row] = await q.query<DeliveryRow>(
    `UPDATE deliveries SET status = 'pending', attempts = 0, next_attempt_at = now(), updated_at = now()
     WHERE webhook_id = $1 AND id = $2 AND status <> 'pending' RETURNING ${COLUMNS}`,
    [webhookId, id],
  );
  return row && toDelivery(row);
}

export async function cancelPendingDeliveries(q: Queryable, webhookId: string): Promise<void> {
  await q.query(
    "UPDATE deliveries SET status = 'cancelled', updated_at = now() WHERE webhook_id = $1 AND status = 'pending'",
    [webhookId],
  );
}

/** A claimed delivery, with what sending it needs of its webhook. */
export interface ClaimedDelivery extends Claimed<'deliver'> {
  event_id: string;
  event: string;
  /** The request body: the event's envelope as stored with the event. */
  body: string;
  url: string;
  signing_secret: string;
  /** The webhook is active and not deleted. */
  live: boolean;
}

/** The deliveries table as the jobs module sees it: due at next_attempt_at, one kind. */
const QUEUE = {
  name: 'deliveries',
  table: 'deliveries',
  due: 'next_attempt_at',
  kind: "'deliver'",
  created: 'created_at',
} as const;

/** Every pending delivery, a first attempt held back by the schedule included: what the metrics count. */
export const PENDING_DELIVERIES: QueueTable = { ...QUEUE, waiting: () => "c.status = 'pending'" };

/**
 * Deliveries are a queue of the jobs module in their own table, which is also their log: a pending
 * delivery is due at next_attempt_at (its first attempt held back by `firstDelaySeconds` after its
 * event), and a claim counts its attempt. One claimed once its `maxAttempts` were spent is exhausted.
 */
export function deliveriesQueue(options: {
  firstDelaySeconds: number;
  maxAttempts: number;
}): QueueTable<ClaimedDelivery> {
  return {
    ...QUEUE,
    waiting: (param) =>
      `c.status = 'pending' AND (c.attempts > 0 OR c.created_at <= now() - make_interval(secs => ${param(options.firstDelaySeconds)}))`,
    select: `c.event_id, c.event, e.payload::text AS body, w.url, w.signing_secret, (w.is_active AND w.deleted_at IS NULL) AS live`,
    join: 'JOIN webhooks w ON w.id = c.webhook_id JOIN events e ON e.id = c.event_id',
    maxAttempts: options.maxAttempts,
  };
}

/** What an attempt came to: the delivery's new status, and when it is due again if still pending. */
export interface AttemptRecord {
  lease: Lease;
  status: DeliveryStatus;
  delaySeconds: number;
  responseStatus: number | null;
  error: string | null;
}

/**
 * Writes the outcomes of several attempts in one statement; each only while its delivery is still
 * pending (a delivery cancelled meanwhile, its webhook deleted, stays cancelled) and still leased
 * with the attempt's token. Returns the statuses written, by delivery id: the outcomes recorded.
 */
export async function recordAttempts(
  q: Queryable,
  records: readonly AttemptRecord[],
): Promise<Map<string, DeliveryStatus>> {
  const rows = await q.query<{ id: string; status: DeliveryStatus }>(
    `UPDATE deliveries d SET status = o.status, next_attempt_at = now() + make_interval(secs => o.delay),
       last_response_status = o.code, last_error = o.error, lease_token = NULL, failing_since = NULL,
       updated_at = now()
     FROM unnest($1::text[], $2::text[], $3::float8[], $4::int4[], $5::text[], $6::text[])
       AS o (id, status, delay, code, error, token)
     WHERE d.id = o.id AND d.status = 'pending' AND d.lease_token = o.token
     RETURNING d.id, d.status`,
    [
      records.map((r) => r.lease.id),
      records.map((r) => r.status),
      records.map((r) => r.delaySeconds),
      records.map((r) => r.responseStatus),
      records.map((r) => r.error),
      records.map((r) => r.lease.lease_token),
    ],
  );
  return new Map(rows.map((row) => [row.id, row.status]));
}

/** Cancels a claimed delivery that was not sent, setting its attempts back to `attempts`. */
export async function cancelClaimed(q: Queryable, lease: Lease, attempts: number): Promise<void> {
  await q.query(
    `UPDATE deliveries SET status = 'cancelled', attempts = $3, lease_token = NULL, updated_at = now()
     WHERE id = $1 AND lease_token = $2 AND status = 'pending'`,
    [lease.id, lease.lease_token, attempts],
  );
}

/** Gives up a claimed delivery whose last attempt's outcome was never recorded. */
export async function markInterrupted(q: Queryable, lease: Lease): Promise<void> {
  await q.query(
    `UPDATE deliveries SET status = 'dead', lease_token = NULL, updated_at = now(),
       last_error = 'the last attempt was interrupted before its outcome was recorded'
     WHERE id = $1 AND lease_token = $2 AND status = 'pending'`,
    [lease.id, lease.lease_token],
  );
}

/** An event of a change, with the webhooks it goes to. */
export interface EventDeliveries {
  id: string;
  type: EventType;
  webhookIds: string[];
}

/**
 * One pending delivery of each event to each of its webhooks, due at once, in the events' transaction:
 * one statement for all of them, none when no webhook is to receive any. The body is the event's
 * payload, read with the claim.
 */
export async function insertDeliveries(
  q: Queryable,
  projectId: string,
  events: readonly EventDeliveries[],
): Promise<void> {
  const webhookIds = events.flatMap((event) => event.webhookIds);
  if (webhookIds.length === 0) return;
  await q.query(
    `INSERT INTO deliveries (id, webhook_id, project_id, event_id, event, next_attempt_at, traceparent)
     SELECT d.id, d.webhook_id, $1, e.id, e.type, now(), $2
     FROM unnest($3::text[], $4::text[], $5::int8[]) WITH ORDINALITY AS d (id, webhook_id, event, n)
     JOIN unnest($6::text[], $7::text[]) WITH ORDINALITY AS e (id, type, n) ON e.n = d.event
     ORDER BY d.n`,
    [
      projectId,
      currentTraceparent(),
      webhookIds.map(() => newId('dlv')),
      webhookIds,
      events.flatMap((event, index) => event.webhookIds.map(() => index + 1)),
      events.map((event) => event.id),
      events.map((event) => event.type),
    ],
  );
}
