import { invalidState, invalidUrl, notFound, validationError, webhookNotFound } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { webhookUrlProblem } from '../../infra/http/safe-agent.ts';
import { isId, newId } from '../../lib/ids.ts';
import { randomSecret } from '../../lib/secrets.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { changedFields, recordAudit } from '../audit/service.ts';
import { EVENT_TYPES, type EventType } from '../events/outbox.ts';

export interface Webhook {
  id: string;
  url: string;
  events: EventType[];
  is_active: boolean;
  created_at: string;
  updated_at: string;
}

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

interface WebhookRow extends Omit<Webhook, 'created_at' | 'updated_at'> {
  created_at: Date;
  updated_at: Date;
}

interface DeliveryRow extends Omit<Delivery, 'created_at' | 'updated_at' | 'next_attempt_at'> {
  created_at: Date;
  updated_at: Date;
  next_attempt_at: Date;
}

const WEBHOOK_COLUMNS = 'id, url, events, is_active, created_at, updated_at';
const DELIVERY_COLUMNS =
  'id, webhook_id, event, event_id, status, attempts, next_attempt_at, last_response_status, last_error, created_at, updated_at';

/** What an audit entry shows of a webhook: never its signing secret (not even selected). */
const settingsOf = (row: WebhookRow) => ({ url: row.url, events: row.events, is_active: row.is_active });

const toWebhook = (row: WebhookRow): Webhook => ({
  ...row,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

const toDelivery = (row: DeliveryRow): Delivery => ({
  ...row,
  next_attempt_at: row.status === 'pending' ? row.next_attempt_at.toISOString() : null,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

export interface WebhookInput {
  url?: string;
  events?: string[];
  is_active?: boolean;
}

export function createWebhookService(deps: { db: Db; allowPrivateNetworks: boolean }) {
  const { db, allowPrivateNetworks } = deps;

  async function checkInput(input: WebhookInput): Promise<void> {
    if (input.url !== undefined) {
      const problem = await webhookUrlProblem(input.url, allowPrivateNetworks);
      if (problem) throw invalidUrl(problem);
    }
    if (input.events !== undefined) {
      const unknown = input.events.find((event) => !(EVENT_TYPES as readonly string[]).includes(event));
      if (unknown !== undefined) {
        throw validationError(`events has an unknown event ${JSON.stringify(unknown)}`, {
          field: 'events',
          value: unknown,
          allowed: EVENT_TYPES,
        });
      }
      if (input.events.length === 0)
        throw validationError('events must list at least one event', { field: 'events' });
    }
  }

  /** The webhook (404 when missing or deleted); with a transaction `q`, locked until it ends. */
  async function find(projectId: string, id: string, q?: Queryable): Promise<WebhookRow> {
    const [row] = isId('wh', id)
      ? await (q ?? db).query<WebhookRow>(
          `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL${q ? ' FOR UPDATE' : ''}`,
          [projectId, id],
        )
      : [];
    if (!row) throw webhookNotFound();
    return row;
  }

  return {
    async create(
      projectId: string,
      input: Required<Pick<WebhookInput, 'url' | 'events'>> & WebhookInput,
      audit: AuditContext,
    ) {
      await checkInput(input);
      const secret = `whsec_${randomSecret()}`;
      const row = await db.tx(async (q) => {
        const [inserted] = await q.query<WebhookRow>(
          `INSERT INTO webhooks (id, project_id, url, events, is_active, signing_secret) VALUES ($1, $2, $3, $4, $5, $6)
           RETURNING ${WEBHOOK_COLUMNS}`,
          [newId('wh'), projectId, input.url, [...new Set(input.events)], input.is_active ?? true, secret],
        );
        await recordAudit(q, audit, {
          action: 'webhook.create',
          projectId,
          targets: { webhook_id: inserted!.id },
          after: settingsOf(inserted!),
        });
        return inserted!;
      });
      return { ...toWebhook(row), signing_secret: secret };
    },

    async list(projectId: string): Promise<Webhook[]> {
      const rows = await db.query<WebhookRow>(
        `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE project_id = $1 AND deleted_at IS NULL ORDER BY id DESC`,
        [projectId],
      );
      return rows.map(toWebhook);
    },

    async get(projectId: string, id: string): Promise<Webhook> {
      return toWebhook(await find(projectId, id));
    },

    /** Changes what is given; the signing secret never rotates here. */
    async update(projectId: string, id: string, input: WebhookInput, audit: AuditContext): Promise<Webhook> {
      await find(projectId, id);
      await checkInput(input);
      return db.tx(async (q) => {
        const current = await find(projectId, id, q);
        const [row] = await q.query<WebhookRow>(
          `UPDATE webhooks SET url = $3, events = $4, is_active = $5, updated_at = now()
           WHERE project_id = $1 AND id = $2 RETURNING ${WEBHOOK_COLUMNS}`,
          [
            projectId,
            id,
            input.url ?? current.url,
            input.events ? [...new Set(input.events)] : current.events,
            input.is_active ?? current.is_active,
          ],
        );
        await recordAudit(q, audit, {
          action: 'webhook.update',
          projectId,
          targets: { webhook_id: id },
          ...changedFields(settingsOf(current), settingsOf(row!)),
        });
        return toWebhook(row!);
      });
    },

    /** Deletes the webhook and cancels its pending deliveries, in one transaction. */
    async remove(projectId: string, id: string, audit: AuditContext): Promise<void> {
      await db.tx(async (q) => {
        const current = await find(projectId, id, q);
        await q.query(
          'UPDATE webhooks SET deleted_at = now(), updated_at = now() WHERE project_id = $1 AND id = $2',
          [projectId, id],
        );
        await q.query(
          "UPDATE deliveries SET status = 'cancelled', updated_at = now() WHERE webhook_id = $1 AND status = 'pending'",
          [id],
        );
        await recordAudit(q, audit, {
          action: 'webhook.delete',
          projectId,
          targets: { webhook_id: id },
          before: settingsOf(current),
        });
      });
    },

    async deliveries(projectId: string, webhookId: string, status: DeliveryStatus | undefined) {
      await find(projectId, webhookId);
      // One statement, so that the page and the total are read from the same snapshot while the
      // dispatcher changes statuses (the window count is taken before the LIMIT).
      const rows = await db.query<DeliveryRow & { total: number }>(
        `SELECT ${DELIVERY_COLUMNS}, count(*) OVER ()::int8 AS total FROM deliveries
         WHERE webhook_id = $1 AND ($2::text IS NULL OR status = $2)
         ORDER BY id DESC LIMIT 200`,
        [webhookId, status ?? null],
      );
      return { items: rows.map(({ total: _, ...row }) => toDelivery(row)), total: rows[0]?.total ?? 0 };
    },

    /** Sends a finished delivery again, from its first attempt, with the same event id. */
    async redeliver(
      projectId: string,
      webhookId: string,
      deliveryId: string,
      audit: AuditContext,
    ): Promise<Delivery> {
      await find(projectId, webhookId);
      const [current] = await db.query<{ status: DeliveryStatus }>(
        'SELECT status FROM deliveries WHERE webhook_id = $1 AND id = $2',
        [webhookId, deliveryId],
      );
      if (!current) throw notFound('Delivery');
      return db.tx(async (q) => {
        const [row] = await q.query<DeliveryRow>(
          `UPDATE deliveries SET status = 'pending', attempts = 0, next_attempt_at = now(), updated_at = now()
           WHERE webhook_id = $1 AND id = $2 AND status <> 'pending' RETURNING ${DELIVERY_COLUMNS}`,
          [webhookId, deliveryId],
        );
        if (!row) throw invalidState('The delivery is still pending', { status: current.status });
        await recordAudit(q, audit, {
          action: 'webhook.redeliver',
          projectId,
          targets: { webhook_id: webhookId, delivery_id: deliveryId },
        });
        return toDelivery(row);
      });
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
