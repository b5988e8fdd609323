import type { Queryable } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { insertDeliveries } from '../webhooks/delivery-repo.ts';
import type { EventFile, EventType } from './types.ts';

/**
 * Records an event in the outbox (the events table), and through the webhooks' repo one pending
 * delivery per active webhook of the project subscribed to it. Call it with the transaction that
 * makes the change, so the change, its event and its deliveries are committed (or rolled back) together.
 * Events are kept for good: their deliveries read their bodies from them (a foreign key holds it).
 */
export async function recordEvent(
  q: Queryable,
  project: { id: string; organization_id: string },
  type: EventType,
  file: EventFile,
): Promise<string> {
  const [id] = await recordEvents(q, project, [{ type, file }]);
  return id!;
}

/** Records several events of one change, in order, in one statement (see recordEvent). */
export async function recordEvents(
  q: Queryable,
  project: { id: string; organization_id: string },
  events: { type: EventType; file: EventFile }[],
): Promise<string[]> {
  const recorded = events.map(({ type, file }) => ({
    id: newId('evt'),
    type,
    fileId: file.id,
    payload: JSON.stringify({
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
    }),
  }));
  // One round trip for the events and the webhooks they go to (a data-modifying WITH always runs).
  const webhooks = await q.query<{ id: string; events: string[] }>(
    // clock_timestamp(): the moment of the change, not the start of its transaction (which may have
    // waited on a lock while another change to the file went first); rows in the given order.
    `WITH event AS (
       INSERT INTO events (id, project_id, type, file_id, payload, created_at)
       SELECT e.id, $1, e.type, e.file_id, e.payload::jsonb, clock_timestamp()
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS e (id, type, file_id, payload, n)
       ORDER BY e.n
     )
     SELECT id, events FROM webhooks
     WHERE project_id = $1 AND is_active AND deleted_at IS NULL AND events && $3::text[] ORDER BY id`,
    [
      project.id,
      recorded.map((event) => event.id),
      recorded.map((event) => event.type),
      recorded.map((event) => event.fileId),
      recorded.map((event) => event.payload),
    ],
  );
  // Due at once: the dispatcher holds a first attempt back by the schedule's first delay itself.
  await insertDeliveries(
    q,
    project.id,
    recorded.map(({ id, type }) => ({
      id,
      type,
      webhookIds: webhooks.filter((webhook) => webhook.events.includes(type)).map((webhook) => webhook.id),
    })),
  );
  return recorded.map((event) => event.id);
}
