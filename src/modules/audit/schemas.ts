import { type Static, Type } from 'typebox';
import {
  Defaulted,
  IsoDate,
  Nullable,
  Ref,
  ServiceChecked,
  StringEnum,
  Timestamp,
} from '../../http/schemas.ts';
import { idPattern } from '../../lib/ids.ts';

/** What the audit log records: every management action, and the destructive or privileged file actions. */
export const AUDIT_ACTIONS = [
  'organization.create',
  'project.create',
  'project.update',
  'api_key.create',
  'api_key.revoke',
  's3_credential.create',
  's3_credential.revoke',
  's3_credential.create_temporary',
  'webhook.create',
  'webhook.update',
  'webhook.delete',
  'webhook.redeliver',
  'upload_token.create',
  'metadata_schema.set',
  'metadata_schema.delete',
  'file.legal_hold.place',
  'file.legal_hold.release',
  'file.delete',
  'file.restore',
  'file.version.delete',
  'file.rescan',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * Who acted: the admin key, a project's API key, an upload token, a long-lived S3 credential, or the
 * `coffer admin` command (a temporary S3 credential acts as the token or key it was issued to).
 */
export const ACTOR_TYPES = ['admin', 'api_key', 'upload_token', 's3_credential', 'cli'] as const;
export type ActorType = (typeof ACTOR_TYPES)[number];

/** Who made a change, from where, in which request: what every entry of the change records. */
export interface AuditContext {
  actorType: ActorType;
  /** The API key's, upload token's or S3 credential's id; null for the admin key and the CLI. */
  actorId: string | null;
  ip: string | null;
  requestId: string | null;
}

const Changes = Nullable(
  Type.Record(Type.String(), Type.Unknown(), {
    description: 'The changed fields only (for a creation: the new object), never a secret',
  }),
);

export const AuditEntry = Type.Object(
  {
    id: Type.String({ description: 'aud_…; ids sort by time' }),
    created_at: Timestamp,
    organization_id: Type.String(),
    project_id: Nullable(Type.String({ description: 'null for an action on the organization itself' })),
    action: StringEnum(AUDIT_ACTIONS),
    actor_type: StringEnum(ACTOR_TYPES),
    actor_id: Nullable(
      Type.String({
        description: 'The API key or S3 credential (key_…) or upload token (tok_…); null for the admin key',
      }),
    ),
    client_ip: Nullable(Type.String()),
    request_id: Nullable(
      Type.String({ description: 'The x-request-id of the request that made the change' }),
    ),
    targets: Type.Record(Type.String(), Type.String(), {
      description: 'The ids the action was about, e.g. {"file_id": "file_…", "version_id": "ver_…"}',
    }),
    before: Changes,
    after: Changes,
  },
  { $id: 'AuditEntry', description: 'One recorded action' },
);
export type AuditEntry = Static<typeof AuditEntry>;

export const AuditLogQuery = Type.Object({
  action: Type.Optional(StringEnum(AUDIT_ACTIONS)),
  actor_type: Type.Optional(StringEnum(ACTOR_TYPES)),
  actor_id: Type.Optional(
    Type.String({ maxLength: 64, description: 'An API key, upload token or S3 credential id' }),
  ),
  from: Type.Optional(IsoDate('Earliest created_at included')),
  to: Type.Optional(IsoDate('Latest created_at included')),
  limit: Defaulted(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  cursor: Type.Optional(
    ServiceChecked(Type.String({ pattern: idPattern('aud'), description: 'A previous next_cursor' })),
  ),
});
export type AuditLogQuery = Static<typeof AuditLogQuery>;

export const AuditEntryList = Type.Object(
  {
    items: Type.Array(Ref(AuditEntry)),
    limit: Type.Integer(),
    has_more: Type.Boolean(),
    next_cursor: Nullable(Type.String()),
  },
  {
    $id: 'AuditEntryList',
    description:
      'A page of the audit log, newest first; page on with next_cursor (an audit log has no total)',
  },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const auditSchemas = [AuditEntry, AuditEntryList];
