import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { NoContent, ProjectParams, Ref, StringEnum } from '../../http/schemas.ts';
import { auditContext } from '../audit/service.ts';
import { DELIVERY_STATUSES } from './delivery-repo.ts';
import {
  CreatedWebhook,
  CreateWebhookBody,
  Delivery,
  DeliveryList,
  UpdateWebhookBody,
  Webhook,
  WebhookList,
} from './schemas.ts';
import type { WebhookService } from './service.ts';

const WebhookParams = Type.Object({ project_id: Type.String(), webhook_id: Type.String() });
const tags = ['Webhooks'];

export function webhookRoutes(webhooks: WebhookService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/projects/:project_id/webhooks',
      {
        config: { access: 'projects:read' },
        schema: {
          tags,
          operationId: 'listWebhooks',
          summary: 'List webhooks',
          params: ProjectParams,
          response: { 200: Ref(WebhookList), ...errors('NOT_FOUND') },
        },
      },
      async (request) => {
        const items = await webhooks.list(request.project.id);
        return { items, total: items.length };
      },
    );

    app.post(
      '/projects/:project_id/webhooks',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'createWebhook',
          summary: 'Register a webhook',
          description:
            'HTTPS only; private, loopback and link-local targets are refused. Each delivery is a POST of the event envelope signed with x-coffer-signature: the lowercase hex HMAC-SHA256 of the raw body with signing_secret.',
          params: ProjectParams,
          body: Ref(CreateWebhookBody),
          response: { 201: Ref(CreatedWebhook), ...errors('NOT_FOUND', ...BODY_ERRORS, 'invalid_url') },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await webhooks.create(request.project.id, request.body, auditContext(request))),
    );

    app.get(
      '/projects/:project_id/webhooks/:webhook_id',
      {
        config: { access: 'projects:read' },
        schema: {
          tags,
          operationId: 'getWebhook',
          summary: 'Get a webhook',
          params: WebhookParams,
          response: { 200: Ref(Webhook), ...errors('NOT_FOUND', 'webhook_not_found') },
        },
      },
      async (request) => webhooks.get(request.project.id, request.params.webhook_id),
    );

    app.put(
      '/projects/:project_id/webhooks/:webhook_id',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'updateWebhook',
          summary: 'Update a webhook',
          description: 'Fields left out keep their value. The signing secret does not change.',
          params: WebhookParams,
          body: Ref(UpdateWebhookBody),
          response: {
            200: Ref(Webhook),
            ...errors('NOT_FOUND', 'webhook_not_found', ...BODY_ERRORS, 'invalid_url'),
          },
        },
      },
      async (request) =>
        webhooks.update(request.project.id, request.params.webhook_id, request.body, auditContext(request)),
    );

    app.delete(
      '/projects/:project_id/webhooks/:webhook_id',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'deleteWebhook',
          summary: 'Delete a webhook',
          description: 'Pending deliveries and retries are cancelled.',
          params: WebhookParams,
          response: { 204: NoContent, ...errors('NOT_FOUND', 'webhook_not_found') },
        },
      },
      async (request, reply) => {
        await webhooks.remove(request.project.id, request.params.webhook_id, auditContext(request));
        return reply.code(204).send();
      },
    );

    app.get(
      '/projects/:project_id/webhooks/:webhook_id/deliveries',
      {
        config: { access: 'projects:read' },
        schema: {
          tags,
          operationId: 'listWebhookDeliveries',
          summary: 'List deliveries (newest first, at most 200)',
          params: WebhookParams,
          querystring: Type.Object({ status: Type.Optional(StringEnum(DELIVERY_STATUSES)) }),
          response: { 200: Ref(DeliveryList), ...errors('NOT_FOUND', 'webhook_not_found') },
        },
      },
      async (request) =>
        webhooks.deliveries(request.project.id, request.params.webhook_id, request.query.status),
    );

    app.post(
      '/projects/:project_id/webhooks/:webhook_id/deliveries/:delivery_id/redeliver',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'redeliverWebhookDelivery',
          summary: 'Send a delivery again',
          description:
            'For a delivered, dead or cancelled delivery: it is retried from its first attempt, with the same event id.',
          params: Type.Object({
            project_id: Type.String(),
            webhook_id: Type.String(),
            delivery_id: Type.String(),
          }),
          response: { 202: Ref(Delivery), ...errors('NOT_FOUND', 'webhook_not_found', 'INVALID_STATE') },
        },
      },
      async (request, reply) =>
        reply
          .code(202)
          .send(
            await webhooks.redeliver(
              request.project.id,
              request.params.webhook_id,
              request.params.delivery_id,
              auditContext(request),
            ),
          ),
    );
  };
}
