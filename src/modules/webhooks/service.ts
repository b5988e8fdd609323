import { invalidState, invalidUrl, notFound, validationError, webhookNotFound } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { webhookUrlProblem } from '../../infra/http/safe-agent.ts';
import { isId, newId } from '../../lib/ids.ts';
import { randomSecret } from '../../lib/secrets.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { changedFields, recordAudit } from '../audit/service.ts';
import { EVENT_TYPES } from '../events/types.ts';
import type { Delivery, DeliveryStatus } from './delivery-repo.ts';
import * as deliveryRepo from './delivery-repo.ts';
import type { Webhook } from './repo.ts';
import * as repo from './repo.ts';

/** What an audit entry shows of a webhook: never its signing secret (not even selected). */
const settingsOf = (webhook: Webhook) => ({
  url: webhook.url,
  events: webhook.events,
  is_active: webhook.is_active,
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
  async function find(projectId: string, id: string, q?: Queryable): Promise<Webhook> {
    const webhook = isId('wh', id)
      ? await repo.findWebhook(q ?? db, projectId, id, q !== undefined)
      : undefined;
    if (!webhook) throw webhookNotFound();
    return webhook;
  }

  return {
    async create(
      projectId: string,
      input: Required<Pick<WebhookInput, 'url' | 'events'>> & WebhookInput,
      audit: AuditContext,
    ) {
      await checkInput(input);
      const secret = `whsec_${randomSecret()}`;
      const webhook = await db.tx(async (q) => {
        const inserted = await repo.insertWebhook(q, {
          id: newId('wh'),
          projectId,
          url: input.url,
          events: [...new Set(input.events)],
          isActive: input.is_active ?? true,
          signingSecret: secret,
        });
        await recordAudit(q, audit, {
          action: 'webhook.create',
          projectId,
          targets: { webhook_id: inserted.id },
          after: settingsOf(inserted),
        });
        return inserted;
      });
      return { ...webhook, signing_secret: secret };
    },

    list(projectId: string): Promise<Webhook[]> {
      return repo.listWebhooks(db, projectId);
    },

    get(projectId: string, id: string): Promise<Webhook> {
      return find(projectId, id);
    },

    /** Changes what is given; the signing secret never rotates here. */
    async update(projectId: string, id: string, input: WebhookInput, audit: AuditContext): Promise<Webhook> {
      await find(projectId, id);
      await checkInput(input);
      return db.tx(async (q) => {
        const current = await find(projectId, id, q);
        const updated = await repo.updateWebhook(q, projectId, id, {
          url: input.url ?? current.url,
          events: input.events ? [...new Set(input.events)] : current.events,
          isActive: input.is_active ?? current.is_active,
        });
        await recordAudit(q, audit, {
          action: 'webhook.update',
          projectId,
          targets: { webhook_id: id },
          ...changedFields(settingsOf(current), settingsOf(updated)),
        });
        return updated;
      });
    },

    /** Deletes the webhook and cancels its pending deliveries, in one transaction. */
    async remove(projectId: string, id: string, audit: AuditContext): Promise<void> {
      await db.tx(async (q) => {
        const current = await find(projectId, id, q);
        await repo.deleteWebhook(q, projectId, id);
        await deliveryRepo.cancelPendingDeliveries(q, id);
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
      return deliveryRepo.listDeliveries(db, webhookId, status);
    },

    /** Sends a finished delivery again, from its first attempt, with the same event id. */
    async redeliver(
      projectId: string,
      webhookId: string,
      deliveryId: string,
      audit: AuditContext,
    ): Promise<Delivery> {
      await find(projectId, webhookId);
      const status = await deliveryRepo.findDeliveryStatus(db, webhookId, deliveryId);
      if (!status) throw notFound('Delivery');
      return db.tx(async (q) => {
        const restarted = await deliveryRepo.restartDelivery(q, webhookId, deliveryId);
        if (!restarted) throw invalidState('The delivery is still pending', { status });
        await recordAudit(q, audit, {
          action: 'webhook.redeliver',
          projectId,
          targets: { webhook_id: webhookId, delivery_id: deliveryId },
        });
        return restarted;
      });
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
