import { type Static, Type } from 'typebox';
import { ItemList, Nullable, Ref, StringEnum, Timestamp } from '../../http/schemas.ts';
import { MAX_THUMBNAILS, ThumbnailSpec } from '../renditions/schemas.ts';
import { BUCKET_PATTERN } from './bucket.ts';

export const SCOPES = [
  'upload_tokens:create',
  'files:upload',
  'files:read',
  'files:download',
  'files:update_metadata',
  'files:delete',
  'projects:read',
  'projects:update',
  'audit:read',
] as const;
export type Scope = (typeof SCOPES)[number];

/** The largest object S3 stores; no project ceiling can go beyond it. */
export const MAX_OBJECT_BYTES = 5 * 1024 ** 4;

/** The highest per-key rate limit a project may be given. */
export const MAX_RATE_LIMIT_PER_MINUTE = 100_000_000;

const Thumbnails = Nullable(
  Type.Array(ThumbnailSpec, {
    maxItems: MAX_THUMBNAILS,
    description:
      'Renditions made when an image becomes ready (the parameters of renderFile); a failed one never fails the file. null: none',
  }),
);

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
    max_storage_bytes: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 0,
          maximum: Number.MAX_SAFE_INTEGER,
          description:
            'Quota: bytes the project may hold (files, earlier versions, deleted files not yet collected, uploads in flight); null: no limit',
        }),
      ),
    ),
    max_files: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 0,
          maximum: Number.MAX_SAFE_INTEGER,
          description:
            'Quota: files the project may hold (uploading, processing, ready, deleted not yet collected); null: no limit',
        }),
      ),
    ),
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
    rate_limit_per_minute: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 1,
          maximum: MAX_RATE_LIMIT_PER_MINUTE,
          description:
            "Requests a minute each of the project's API keys may make; null: the server's default. Only the admin key may change it.",
        }),
      ),
    ),
    thumbnails: Type.Optional(Thumbnails),
  },
  { $id: 'ProjectSettingsInput', additionalProperties: false },
);
export type SettingsInput = Static<typeof SettingsInput>;

export const Settings = Type.Object(
  {
    allowed_mime_types: Nullable(Type.String()),
    max_file_size_bytes: Nullable(Type.Integer()),
    max_storage_bytes: Nullable(Type.Integer({ description: 'Quota of bytes; null: no limit' })),
    max_files: Nullable(Type.Integer({ description: 'Quota of files; null: no limit' })),
    signed_url_ttl_seconds: Type.Integer(),
    require_signed_urls: Type.Boolean(),
    virus_scan_enabled: Type.Boolean(),
    versioning_enabled: Type.Boolean(),
    enforce_schema: Type.Boolean(),
    ip_allowlist: Nullable(Type.Array(Type.String())),
    rate_limit_per_minute: Nullable(
      Type.Integer({
        description: "Requests a minute per API key of the project; null: the server's default",
      }),
    ),
    thumbnails: Thumbnails,
  },
  { $id: 'ProjectSettings' },
);
export type Settings = Static<typeof Settings>;

export const DEFAULT_SETTINGS: Settings = {
  allowed_mime_types: null,
  max_file_size_bytes: null,
  max_storage_bytes: null,
  max_files: null,
  signed_url_ttl_seconds: 3600,
  require_signed_urls: false,
  virus_scan_enabled: false,
  versioning_enabled: false,
  enforce_schema: false,
  ip_allowlist: null,
  rate_limit_per_minute: null,
  thumbnails: null,
};

export const Organization = Type.Object(
  { id: Type.String(), name: Type.String(), created_at: Timestamp },
  { $id: 'Organization' },
);
export type Organization = Static<typeof Organization>;
export const OrganizationList = ItemList(Organization);

const BUCKET_DESCRIPTION =
  "The project's bucket on the S3-compatible endpoint (/s3/{bucket}/{key}): unique on the server";

export const Project = Type.Object(
  {
    id: Type.String(),
    organization_id: Type.String(),
    name: Type.String(),
    bucket: Type.String({ description: BUCKET_DESCRIPTION }),
    settings: Ref(Settings),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Project' },
);
export type Project = Static<typeof Project>;
export const ProjectList = ItemList(Project);

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

export const CREDENTIAL_KINDS = ['admin', 'api_key', 'upload_token', 's3_credential'] as const;

export const Identity = Type.Object(
  {
    kind: StringEnum(CREDENTIAL_KINDS),
    project_id: Nullable(
      Type.String({
        description: 'The project of an API key, upload token or S3 credential; null for the admin key',
      }),
    ),
    scopes: Type.Array(StringEnum(SCOPES), {
      description: 'What the credential may do on its project (the admin key: everything, on every project)',
    }),
  },
  { $id: 'Identity', description: 'The credential a request was made with' },
);
export type Identity = Static<typeof Identity>;

export const CreatedApiKey = Type.Object(
  { ...ApiKey.properties, key: Type.String({ description: 'coffer_live_…; shown only here' }) },
  { $id: 'CreatedApiKey', description: 'The new API key, with its secret' },
);
export const ApiKeyList = ItemList(ApiKey);

// Not blank: at least one character that is not white space (the service trims names).
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });
const Bucket = (more = '') =>
  Type.String({
    minLength: 3,
    maxLength: 63,
    pattern: BUCKET_PATTERN,
    description: `${BUCKET_DESCRIPTION}: 3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit, none of the prefixes (xn--, sthree-, amzn-s3-demo-) and suffixes (-s3alias, --ol-s3, --x-s3, --table-s3) S3 reserves (409 CONFLICT when taken). Set with the admin key only.${more}`,
  });

export const CreateOrganizationBody = Type.Object(
  { name: Name },
  { $id: 'CreateOrganizationRequest', additionalProperties: false },
);
export const CreateProjectBody = Type.Object(
  {
    name: Name,
    bucket: Type.Optional(Bucket(' Omitted: derived from the name, with a short suffix when that is taken.')),
    settings: Type.Optional(Ref(SettingsInput)),
  },
  { $id: 'CreateProjectRequest', additionalProperties: false },
);
export const UpdateProjectBody = Type.Object(
  { name: Type.Optional(Name), bucket: Type.Optional(Bucket()), settings: Type.Optional(Ref(SettingsInput)) },
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
  ProjectList,
  Identity,
  ApiKey,
  CreatedApiKey,
  ApiKeyList,
  CreateOrganizationBody,
  CreateProjectBody,
  UpdateProjectBody,
  CreateApiKeyBody,
];
