import type { Queryable } from '../../infra/db.ts';
import type { EventType } from '../events/types.ts';

export interface Webhook {
  id: string;
  url: string;
  events: EventType[];
  is_active: boolean;
  created_at: string;
  updated_at: string;
}

interface WebhookRow extends Omit<Webhook, 'created_at' | 'updated_at'> {
  created_at: Date;
  updated_at: Date;
}

/** Never the signing secret: it is shown once, at creation, from the caller's own copy. */
const COLUMNS = 'id, url, events, is_active, created_at, updated_at';

const toWebhook = (row: WebhookRow): Webhook => ({
  ...row,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

export async function insertWebhook(
  q: Queryable,
  webhook: {
    id: string;
    projectId: string;
    url: string;
    events: string[];
    isActive: boolean;
    signingSecret: string;
  },
): Promise<Webhook> {
  const [row] = await q.query<WebhookRow>(
    `INSERT INTO webhooks (id, project_id, url, events, is_active, signing_secret) VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING ${COLUMNS}`,
    [webhook.id, webhook.projectId, webhook.url, webhook.events, webhook.isActive, webhook.signingSecret],
  );
  return toWebhook(row!);
}

/** The webhook unless deleted; `forUpdate` locks it until the transaction ends. */
export async function findWebhook(
  q: Queryable,
  projectId: string,
  id: string,
  forUpdate = false,
): Promise<Webhook | undefined> {
  const [row] = await q.query<WebhookRow>(
    `SELECT ${COLUMNS} FROM webhooks WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL${forUpdate ? ' FOR UPDATE' : ''}`,
    [projectId, id],
  );
  return row && toWebhook(row);
}

/** The project's webhooks not deleted, newest first. */
export async function listWebhooks(q: Queryable, projectId: string): Promise<Webhook[]> {
  const rows = await q.query<WebhookRow>(
    `SELECT ${COLUMNS} FROM webhooks WHERE project_id = $1 AND deleted_at IS NULL ORDER BY id DESC`,
    [projectId],
  );
  return rows.map(toWebhook);
}

export async function updateWebhook(
  q: Queryable,
  projectId: string,
  id: string,
  changes: { url: string; events: string[]; isActive: boolean },
): Promise<Webhook> {
  const [row] = await q.query<WebhookRow>(
    `UPDATE webhooks SET url = $3, events = $4, is_active = $5, updated_at = now()
     WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [projectId, id, changes.url, changes.events, changes.isActive],
  );
  return toWebhook(row!);
}

/** Marks the webhook deleted: its row stays, as its deliveries refer to it. */
export async function deleteWebhook(q: Queryable, projectId: string, id: string): Promise<void> {
  await q.query(
    'UPDATE webhooks SET deleted_at = now(), updated_at = now() WHERE project_id = $1 AND id = $2',
    [projectId, id],
  );
}
