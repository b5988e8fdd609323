import { type Static, Type } from 'typebox';
import { ItemList, Nullable, Ref, StringEnum, Timestamp } from '../../http/schemas.ts';

export const SCOPES = [
  'upload_tokens:create',
  'files:upload',
  'files:read',
  'files:download',
  'files:update_metadata',
  'files:delete',
  'projects:read',
  'projects:update',
] as const;
export type Scope = (typeof SCOPES)[number];

/** The largest object S3 stores; no project ceiling can go beyond it. */
export const MAX_OBJECT_BYTES = 5 * 1024 ** 4;

export const SettingsInput = Type.Object(
  {
    allowed_mime_types: Type.Optional(
      Nullable(
        Type.String({
          maxLength: 4096,
          description: 'Comma-separated MIME allowlist; wildcards like image/* and */*',
        }),
      ),
    ),
    max_file_size_bytes: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: MAX_OBJECT_BYTES }))),
    signed_url_ttl_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400 })),
    require_signed_urls: Type.Optional(Type.Boolean()),
    virus_scan_enabled: Type.Optional(Type.Boolean()),
    versioning_enabled: Type.Optional(Type.Boolean()),
    enforce_schema: Type.Optional(Type.Boolean()),
    ip_allowlist: Type.Optional(
      Nullable(
        Type.Array(Type.String({ maxLength: 64 }), { maxItems: 100, description: 'IPv4 and IPv6 CIDRs' }),
      ),
    ),
  },
  { $id: 'ProjectSettingsInput', additionalProperties: false },
);
export type SettingsInput = Static<typeof SettingsInput>;

export const Settings = Type.Object(
  {
    allowed_mime_types: Nullable(Type.String()),
    max_file_size_bytes: Nullable(Type.Integer()),
    signed_url_ttl_seconds: Type.Integer(),
    require_signed_urls: Type.Boolean(),
    virus_scan_enabled: Type.Boolean(),
    versioning_enabled: Type.Boolean(),
    enforce_schema: Type.Boolean(),
    ip_allowlist: Nullable(Type.Array(Type.String())),
  },
  { $id: 'ProjectSettings' },
);
export type Settings = Static<typeof Settings>;

export const DEFAULT_SETTINGS: Settings = {
  allowed_mime_types: null,
  max_file_size_bytes: null,
  signed_url_ttl_seconds: 3600,
  require_signed_urls: false,
  virus_scan_enabled: false,
  versioning_enabled: false,
  enforce_schema: false,
  ip_allowlist: null,
};

export const Organization = Type.Object(
  { id: Type.String(), name: Type.String(), created_at: Timestamp },
  { $id: 'Organization' },
);
export type Organization = Static<typeof Organization>;
export const OrganizationList = ItemList(Organization);

export const Project = Type.Object(
  {
    id: Type.String(),
    organization_id: Type.String(),
    name: Type.String(),
    settings: Ref(Settings),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Project' },
);
export type Project = Static<typeof Project>;

export const ApiKey = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    scopes: Type.Array(Type.String()),
    key_prefix: Type.String({ description: 'The first characters of the key, to recognise it' }),
    created_at: Timestamp,
    revoked_at: Nullable(Timestamp),
  },
  { $id: 'ApiKey' },
);
export type ApiKey = Static<typeof ApiKey>;

export const CreatedApiKey = Type.Object(
  { ...ApiKey.properties, key: Type.String({ description: 'coffer_live_…; shown only here' }) },
  { $id: 'CreatedApiKey', description: 'The new API key, with its secret' },
);
export const ApiKeyList = ItemList(ApiKey);

const Name = Type.String({ minLength: 1, maxLength: 200 });

export const CreateOrganizationBody = Type.Object(
  { name: Name },
  { $id: 'CreateOrganizationRequest', additionalProperties: false },
);
export const CreateProjectBody = Type.Object(
  { name: Name, settings: Type.Optional(Ref(SettingsInput)) },
  { $id: 'CreateProjectRequest', additionalProperties: false },
);
export const UpdateProjectBody = Type.Object(
  { name: Type.Optional(Name), settings: Type.Optional(Ref(SettingsInput)) },
  { $id: 'UpdateProjectRequest', additionalProperties: false },
);
export const CreateApiKeyBody = Type.Object(
  {
    name: Name,
    scopes: Type.Array(StringEnum(SCOPES), {
      minItems: 1,
      uniqueItems: true,
    }),
  },
  { $id: 'CreateApiKeyRequest', additionalProperties: false },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const projectSchemas = [
  SettingsInput,
  Settings,
  Organization,
  OrganizationList,
  Project,
  ApiKey,
  CreatedApiKey,
  ApiKeyList,
  CreateOrganizationBody,
  CreateProjectBody,
  UpdateProjectBody,
  CreateApiKeyBody,
];
