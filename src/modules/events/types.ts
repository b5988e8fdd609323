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
