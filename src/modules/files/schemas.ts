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
import { CONTENT_TYPE_PATTERN } from '../../lib/mime.ts';
import { MAX_OBJECT_BYTES } from '../projects/schemas.ts';
import { RenditionFields } from '../renditions/schemas.ts';
import {
  CATEGORIES,
  FILE_STATUSES,
  MAX_FILENAME_LENGTH,
  MAX_METADATA_BYTES,
  MAX_URL_TTL_SECONDS,
  MIN_URL_TTL_SECONDS,
  NAME_RULES,
} from './rules.ts';

export const FileObject = Type.Object(
  {
    id: Type.String({ description: 'file_…' }),
    project_id: Type.String(),
    folder_id: Nullable(Type.String({ description: 'null: the project root' })),
    status: StringEnum(FILE_STATUSES),
    filename: Type.String(),
    content_type: Type.String(),
    size_bytes: Type.Integer(),
    category: StringEnum(CATEGORIES),
    storage_key: Type.String(),
    checksum_sha256: Nullable(
      Type.String({
        description:
          'Hex SHA-256 of the stored bytes, then fixed. On the local store it is known at confirm (or complete). On S3 it is null until Coffer has read the bytes: set before the file becomes ready when the project scans, otherwise moments after it became ready (a digest job).',
      }),
    ),
    metadata: Type.Record(Type.String(), Type.Unknown()),
    tags: Type.Array(Type.String()),
    owner_user_id: Nullable(Type.String()),
    owner_org_id: Nullable(Type.String()),
    legal_hold: Type.Boolean(),
    failure_reason: Nullable(Type.String({ description: 'Why the file is failed or quarantined' })),
    scan_signature: Nullable(
      Type.String({ description: 'What the virus scanner found in a quarantined file' }),
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
    deleted_at: Nullable(Timestamp),
  },
  { $id: 'File', description: 'A file' },
);
export type FileObject = Static<typeof FileObject>;

export const FileParams = Type.Object({ project_id: Type.String(), file_id: Type.String() });

const Metadata = Type.Record(Type.String(), Type.Unknown(), {
  description: `Key-value pairs (JSON object) of at most ${MAX_METADATA_BYTES} bytes as JSON`,
});
const Tags = Type.Array(Type.String(), {
  description: 'Trimmed, non-empty, unique; at most 50 of at most 64 characters',
});

export const FileName = Type.String({
  minLength: 1,
  maxLength: MAX_FILENAME_LENGTH,
  description: NAME_RULES,
  examples: ['report.pdf'],
});
export const ContentType = Type.String({
  maxLength: 255,
  pattern: CONTENT_TYPE_PATTERN,
  description: 'A MIME type, stored lower-cased without its parameters',
  examples: ['application/pdf'],
});

export const InitiateBody = Type.Object(
  {
    filename: FileName,
    content_type: ContentType,
    size_bytes: Type.Integer({ minimum: 0, maximum: MAX_OBJECT_BYTES }),
    folder_id: Type.Optional(Nullable(Type.String())),
    metadata: Type.Optional(Metadata),
    tags: Type.Optional(Tags),
  },
  { $id: 'InitiateUploadRequest', additionalProperties: false },
);
export type InitiateBody = Static<typeof InitiateBody>;

export const InitiateResponse = Type.Object(
  {
    file_id: Type.String(),
    upload_url: Type.String({
      description: 'PUT the bytes here, with the declared Content-Type and no Authorization',
    }),
    expires_at: Timestamp,
  },
  { $id: 'InitiatedUpload', description: 'The new file and where to send its bytes' },
);

export const ListQuery = Type.Object({
  folder_id: Type.Optional(
    Type.String({ description: 'A folder id, or `root` for files at the project root' }),
  ),
  q: Type.Optional(
    Type.String({
      maxLength: MAX_FILENAME_LENGTH,
      description: 'Case-insensitive substring of the filename',
    }),
  ),
  tags: Type.Optional(
    Type.Array(Type.String(), { description: 'Files having all these tags (repeat the parameter)' }),
  ),
  category: Type.Optional(StringEnum(CATEGORIES)),
  status: Type.Optional(StringEnum(FILE_STATUSES)),
  date_from: Type.Optional(IsoDate('Earliest created_at included')),
  date_to: Type.Optional(IsoDate('Latest created_at included')),
  // Numbers, as the spec types them: a size is whole bytes, so 1.5 includes sizes from 2 (min) or up to 1 (max).
  size_min: Type.Optional(Type.Number({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
  size_max: Type.Optional(Type.Number({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
  metadata: Type.Optional(
    Type.String({ description: 'JSON object; files whose metadata contains all its pairs' }),
  ),
  limit: Defaulted(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Defaulted(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 })),
  cursor: Type.Optional(
    ServiceChecked(
      Type.String({
        pattern: idPattern('file'),
        description: 'A previous next_cursor; takes priority over offset',
      }),
    ),
  ),
});
export type ListQuery = Static<typeof ListQuery>;

export const FileList = Type.Object(
  {
    items: Type.Array(Ref(FileObject)),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
    has_more: Type.Boolean(),
    next_cursor: Nullable(Type.String()),
  },
  { $id: 'FileList', description: 'A page of files, newest first' },
);

/** A URL lifetime; its range is checked only when it is used (see urlLifetimeSeconds). */
export const UrlTtl = Type.Optional(
  ServiceChecked(
    Type.Number({
      minimum: MIN_URL_TTL_SECONDS,
      maximum: MAX_URL_TTL_SECONDS,
      description: 'Seconds; ignored (whatever its value) when require_signed_urls is on',
    }),
  ),
);
export const DownloadQuery = Type.Object({ ttl: UrlTtl, ...RenditionFields });
export const DownloadResponse = Type.Object(
  { url: Type.String(), expires_at: Timestamp },
  { $id: 'PresignedUrl', description: 'A presigned URL, valid until expires_at' },
);

export const TagsBody = Type.Object({ tags: Tags }, { $id: 'FileTagsRequest', additionalProperties: false });
export const MetadataBody = Type.Object(
  { metadata: Metadata },
  { $id: 'FileMetadataRequest', additionalProperties: false },
);
export const MoveBody = Type.Object(
  { folder_id: Nullable(Type.String()) },
  { $id: 'MoveFileRequest', additionalProperties: false },
);
export const LegalHoldBody = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 1000 })) },
  { $id: 'LegalHoldRequest', additionalProperties: false },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const fileSchemas = [
  FileObject,
  FileList,
  InitiateBody,
  InitiateResponse,
  DownloadResponse,
  TagsBody,
  MetadataBody,
  MoveBody,
  LegalHoldBody,
];
