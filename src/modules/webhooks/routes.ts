import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorBody, ItemList, NoContent, Nullable, Timestamp } from '../../http/schemas.ts';
import { MAX_WEBHOOK_URL_LENGTH } from '../../infra/http/safe-agent.ts';
import { EVENT_TYPES } from '../events/outbox.ts';
import { DELIVERY_STATUSES, type WebhookService } from './service.ts';

const StringEnum = <T extends readonly string[]>(values: T) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values] });

const Webhook = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(StringEnum(EVENT_TYPES)),
    is_active: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Webhook' },
);
const CreatedWebhook = Type.Object({
  ...Webhook.properties,
  signing_secret: Type.String({
    description: 'whsec_…; returned only here. Verify x-coffer-signature with it.',
  }),
});
const Delivery = Type.Object(
  {
    id: Type.String(),
    webhook_id: Type.String(),
    event: Type.String(),
    event_id: Type.String({ description: 'The same on every attempt: deduplicate on it' }),
    status: StringEnum(DELIVERY_STATUSES),
    attempts: Type.Integer(),
    next_attempt_at: Nullable(Timestamp),
    last_response_status: Nullable(Type.Integer()),
    last_error: Nullable(Type.String()),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Delivery' },
);
// Events are checked by the service so that an unknown name is 422 VALIDATION_ERROR with the allowed list.
const Events = Type.Array(Type.String({ maxLength: 64 }), { maxItems: 20 });
// Length and syntax are checked by the service, so that every unacceptable URL is 422 invalid_url.
const Url = Type.String({ description: `An https URL of at most ${MAX_WEBHOOK_URL_LENGTH} characters` });
const ProjectParams = Type.Object({ project_id: Type.String() });
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
          summary: 'List webhooks',
          params: ProjectParams,
          response: { 200: ItemList(Webhook), default: ErrorBody },
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
          summary: 'Register a webhook',
          description:
            'HTTPS only; private, loopback and link-local targets are refused. Each delivery is a POST of the event envelope signed with x-coffer-signature: the lowercase hex HMAC-SHA256 of the raw body with signing_secret.',
          params: ProjectParams,
          body: Type.Object(
            { url: Url, events: Events, is_active: Type.Optional(Type.Boolean()) },
            { additionalProperties: false },
          ),
          response: { 201: CreatedWebhook, default: ErrorBody },
        },
      },
      async (request, reply) => reply.code(201).send(await webhooks.create(request.project.id, request.body)),
    );

    app.get(
      '/projects/:project_id/webhooks/:webhook_id',
      {
        config: { access: 'projects:read' },
        schema: {
          tags,
          summary: 'Get a webhook',
          params: WebhookParams,
          response: { 200: Webhook, default: ErrorBody },
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
          summary: 'Update a webhook',
          description: 'Fields left out keep their value. The signing secret does not change.',
          params: WebhookParams,
          body: Type.Object(
            {
              url: Type.Optional(Url),
              events: Type.Optional(Events),
              is_active: Type.Optional(Type.Boolean()),
            },
            { additionalProperties: false },
          ),
          response: { 200: Webhook, default: ErrorBody },
        },
      },
      async (request) => webhooks.update(request.project.id, request.params.webhook_id, request.body),
    );

    app.delete(
      '/projects/:project_id/webhooks/:webhook_id',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          summary: 'Delete a webhook',
          description: 'Pending deliveries and retries are cancelled.',
          params: WebhookParams,
          response: { 204: NoContent, default: ErrorBody },
        },
      },
      async (request, reply) => {
        await webhooks.remove(request.project.id, request.params.webhook_id);
        return reply.code(204).send();
      },
    );

    app.get(
      '/projects/:project_id/webhooks/:webhook_id/deliveries',
      {
        config: { access: 'projects:read' },
        schema: {
          tags,
          summary: 'List deliveries (newest first, at most 200)',
          params: WebhookParams,
          querystring: Type.Object({ status: Type.Optional(StringEnum(DELIVERY_STATUSES)) }),
          response: { 200: ItemList(Delivery), default: ErrorBody },
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
          summary: 'Send a delivery again',
          description:
            'For a delivered, dead or cancelled delivery: it is retried from its first attempt, with the same event id.',
          params: Type.Object({
            project_id: Type.String(),
            webhook_id: Type.String(),
            delivery_id: Type.String(),
          }),
          response: { 202: Delivery, default: ErrorBody },
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
            ),
          ),
    );
  };
}
