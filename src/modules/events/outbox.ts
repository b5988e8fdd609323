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
 * Records an event in the outbox. Call it with the transaction that makes the change, so the
 * change and its event are committed (or rolled back) together.
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
  await q.query(
    'INSERT INTO events (id, project_id, type, file_id, payload) VALUES ($1, $2, $3, $4, $5::jsonb)',
    [id, project.id, type, file.id, JSON.stringify(payload)],
  );
  return id;
}
