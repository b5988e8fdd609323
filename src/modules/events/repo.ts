import type { Queryable } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { insertDeliveries } from '../webhooks/delivery-repo.ts';
import type { EventFile, EventType } from './types.ts';

/**
 * Records an event in the outbox (the events table), and through the webhooks' repo one pending
 * delivery per active webhook of the project subscribed to it. Call it with the transaction that
 * makes the change, so the change, its event and its deliveries are committed (or rolled back) together.
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
  // Due at once: the dispatcher holds a first attempt back by the schedule's first delay itself.
  await insertDeliveries(
    q,
    { id, type, projectId: project.id, payload: json },
    webhooks.map((webhook) => webhook.id),
  );
  return id;
}
