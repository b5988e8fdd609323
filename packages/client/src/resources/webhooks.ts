import type { Api, RequestOptions } from '../api.js';
import type {
  CreatedWebhook,
  CreateWebhookRequest,
  Delivery,
  DeliveryList,
  DeliveryStatus,
  UpdateWebhookRequest,
  Webhook,
  WebhookList,
} from '../types.js';

export interface WebhooksApi {
  /** The answer holds `signing_secret`, shown only this once. */
  create(projectId: string, webhook: CreateWebhookRequest, options?: RequestOptions): Promise<CreatedWebhook>;
  list(projectId: string, options?: RequestOptions): Promise<WebhookList>;
  get(projectId: string, webhookId: string, options?: RequestOptions): Promise<Webhook>;
  /** Fields left out keep their value; the signing secret does not change. */
  update(
    projectId: string,
    webhookId: string,
    changes: UpdateWebhookRequest,
    options?: RequestOptions,
  ): Promise<Webhook>;
  /** Pending deliveries are cancelled. */
  delete(projectId: string, webhookId: string, options?: RequestOptions): Promise<void>;
  /** Newest first, at most 200. */
  deliveries(
    projectId: string,
    webhookId: string,
    query?: { status?: DeliveryStatus },
    options?: RequestOptions,
  ): Promise<DeliveryList>;
  /** Sends a delivered, dead or cancelled delivery again, from its first attempt. */
  redeliver(
    projectId: string,
    webhookId: string,
    deliveryId: string,
    options?: RequestOptions,
  ): Promise<Delivery>;
}

export function webhooksApi(api: Api): WebhooksApi {
  const ids = (project_id: string, webhook_id: string) => ({ project_id, webhook_id });
  return {
    create: (projectId, webhook, options = {}) =>
      api.call('post', '/v1/projects/{project_id}/webhooks', {
        params: { project_id: projectId },
        body: webhook,
        ...options,
      }),
    list: (projectId, options = {}) =>
      api.call('get', '/v1/projects/{project_id}/webhooks', {
        params: { project_id: projectId },
        ...options,
      }),
    get: (projectId, webhookId, options = {}) =>
      api.call('get', '/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: ids(projectId, webhookId),
        ...options,
      }),
    update: (projectId, webhookId, changes, options = {}) =>
      api.call('put', '/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: ids(projectId, webhookId),
        body: changes,
        ...options,
      }),
    delete: async (projectId, webhookId, options = {}) => {
      await api.call('delete', '/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: ids(projectId, webhookId),
        ...options,
      });
    },
    deliveries: (projectId, webhookId, query = {}, options = {}) =>
      api.call('get', '/v1/projects/{project_id}/webhooks/{webhook_id}/deliveries', {
        params: ids(projectId, webhookId),
        query,
        ...options,
      }),
    redeliver: (projectId, webhookId, deliveryId, options = {}) =>
      api.call('post', '/v1/projects/{project_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver', {
        params: { ...ids(projectId, webhookId), delivery_id: deliveryId },
        ...options,
      }),
  };
}
