import { Type } from 'typebox';
import { ItemList, Nullable, ServiceChecked, StringEnum, Timestamp } from '../../http/schemas.ts';
import { MAX_WEBHOOK_URL_LENGTH } from '../../infra/http/safe-agent.ts';
import { EVENT_TYPES } from '../events/types.ts';
import { DELIVERY_STATUSES } from './delivery-repo.ts';

export const Webhook = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(StringEnum(EVENT_TYPES)),
    is_active: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Webhook', description: 'A webhook (its signing secret is shown only at creation)' },
);
export const CreatedWebhook = Type.Object(
  {
    ...Webhook.properties,
    signing_secret: Type.String({
      description: 'whsec_…; returned only here. Verify x-coffer-signature with it.',
    }),
  },
  { $id: 'CreatedWebhook', description: 'The new webhook, with its signing secret' },
);
export const WebhookList = ItemList(Webhook);

export const Delivery = Type.Object(
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
  { $id: 'Delivery', description: 'One event sent to one webhook, with its attempts' },
);
export const DeliveryList = ItemList(Delivery);

// Event names are checked by the service so that an unknown name is 422 VALIDATION_ERROR with the allowed list.
const Events = Type.Array(ServiceChecked(StringEnum(EVENT_TYPES)), { minItems: 1, maxItems: 20 });
// Length and syntax are checked by the service, so that every unacceptable URL is 422 invalid_url.
const Url = ServiceChecked(
  Type.String({
    format: 'uri',
    pattern: '^https://',
    maxLength: MAX_WEBHOOK_URL_LENGTH,
    description: 'An https URL without credentials, to a public address',
  }),
);

export const CreateWebhookBody = Type.Object(
  { url: Url, events: Events, is_active: Type.Optional(Type.Boolean()) },
  { $id: 'CreateWebhookRequest', additionalProperties: false },
);
export const UpdateWebhookBody = Type.Object(
  { url: Type.Optional(Url), events: Type.Optional(Events), is_active: Type.Optional(Type.Boolean()) },
  { $id: 'UpdateWebhookRequest', additionalProperties: false },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const webhookSchemas = [
  Webhook,
  CreatedWebhook,
  WebhookList,
  Delivery,
  DeliveryList,
  CreateWebhookBody,
  UpdateWebhookBody,
];
