import type { Queryable } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';

export const EVENT_TYPES = [
  'file.uploaded',
  'file.ready',
  'file.failed',
  'file.quarantined',
  'file.deleted',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The file as an event describes it, at the moment the event is recorded. */
export interface EventFile {
  id: string;
  project_id: string;
  filename: string;
  size_bytes: number;
  content_type: string;
  status: string;
}

/**
 * Records an event in the outbox, and one pending delivery per active webhook of the project
 * subscribed to it. Call it with the transaction that makes the change, so the change, its event
 * and its deliveries are committed (or rolled back) together.
 */
export async function recordEvent(
  q: Queryable,
  project: { id: string; organization_id: string },
  type: EventType,
  file: EventFile,
): Promise<string> {
  const id = newId('evt');
  const payload = {
    event: type,
    timestamp: new Date().toISOString(),
    organization_id: project.organization_id,
    project_id: project.id,
    data: {
      file_id: file.id,
      filename: file.filename,
      size: file.size_bytes,
      mime_type: file.content_type,
      status: file.status,
    },
  };
  const json = JSON.stringify(payload);
  // One round trip for the event and the webhooks it goes to (a data-modifying WITH always runs).
  const webhooks = await q.query<{ id: string }>(
    // clock_timestamp(): the moment of the change, not the start of its transaction (which may have
    // waited on a lock while another change to the file went first).
    `WITH event AS (
       INSERT INTO events (id, project_id, type, file_id, payload, created_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, clock_timestamp())
     )
     SELECT id FROM webhooks
     WHERE project_id = $2 AND is_active AND deleted_at IS NULL AND $3 = ANY (events) ORDER BY id`,
    [id, project.id, type, file.id, json],
  );
  if (webhooks.length > 0) {
    // Due at once: the dispatcher holds a first attempt back by the schedule's first delay itself.
    await q.query(
      `INSERT INTO deliveries (id, webhook_id, project_id, event_id, event, payload, next_attempt_at)
       SELECT d.id, d.webhook_id, $3, $4, $5, $6::jsonb, now()
       FROM unnest($1::text[], $2::text[]) AS d (id, webhook_id)`,
      [webhooks.map(() => newId('dlv')), webhooks.map((webhook) => webhook.id), project.id, id, type, json],
    );
  }
  return id;
}
