import { Type } from 'typebox';
import { Nullable, Ref, ServiceChecked, StringEnum, Timestamp } from '../../http/schemas.ts';
import { MIME_PATTERN_PATTERN } from '../../lib/mime.ts';
import { ContentType, FileName } from '../files/schemas.ts';
import { MAX_OBJECT_BYTES } from '../projects/schemas.ts';
import { SESSION_STATUSES } from './session-repo.ts';

const OptionalString = Type.Optional(Nullable(Type.String({ maxLength: 255 })));

export const CreateUploadTokenBody = Type.Object(
  {
    max_size: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_OBJECT_BYTES,
        description: 'Bytes per file; default 104857600 or the project limit',
      }),
    ),
    allowed_mime_types: Type.Optional(
      Type.Array(ServiceChecked(Type.String({ maxLength: 255, pattern: MIME_PATTERN_PATTERN })), {
        minItems: 1,
        maxItems: 100,
        description: 'Default: the project list, else */*',
      }),
    ),
    max_files: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: 'Default 10' })),
    folder_id: OptionalString,
    folder_path: Type.Optional(
      Nullable(Type.String({ maxLength: 1024, description: 'Created when missing; wins over folder_id' })),
    ),
    metadata: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()))),
    tags: Type.Optional(Nullable(Type.Array(Type.String()))),
    expires_in: Type.Optional(
      Type.Integer({ minimum: 60, maximum: 86_400, description: 'Seconds; default 3600' }),
    ),
    owner_user_id: OptionalString,
    owner_org_id: OptionalString,
  },
  { $id: 'CreateUploadTokenRequest', additionalProperties: false },
);

export const UploadToken = Type.Object(
  {
    token: Type.String({ description: 'coffer_upload_token_…; shown only here' }),
    expires_at: Timestamp,
    constraints: Type.Object({
      max_size: Type.Integer(),
      allowed_mime_types: Type.Array(Type.String()),
      max_files: Type.Integer(),
    }),
    folder_id: Nullable(Type.String()),
  },
  { $id: 'UploadToken', description: 'A browser upload token and its effective constraints' },
);

export const StartMultipartBody = Type.Object(
  {
    filename: FileName,
    content_type: ContentType,
    total_size_bytes: Type.Integer({ minimum: 0, maximum: MAX_OBJECT_BYTES }),
    folder_id: Type.Optional(Nullable(Type.String())),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    tags: Type.Optional(Type.Array(Type.String())),
  },
  { $id: 'StartMultipartUploadRequest', additionalProperties: false },
);

export const StartedMultipartUpload = Type.Object(
  {
    upload_id: Type.String(),
    file_id: Type.String(),
    expires_at: Timestamp,
    min_part_size_bytes: Type.Integer({
      description: 'Every part but the last must be at least this big',
    }),
  },
  { $id: 'StartedMultipartUpload', description: 'The new multipart upload session' },
);

export const PartUrl = Type.Object(
  {
    upload_id: Type.String(),
    part_number: Type.Integer(),
    url: Type.String(),
    expires_at: Timestamp,
  },
  { $id: 'PartUrl', description: "A presigned URL for one part's bytes" },
);

export const UploadedPart = Type.Object(
  { part_number: Type.Integer(), etag: Type.String(), size_bytes: Type.Integer() },
  { $id: 'UploadedPart' },
);

export const MultipartUpload = Type.Object(
  {
    upload_id: Type.String(),
    file_id: Type.String(),
    status: StringEnum(SESSION_STATUSES),
    total_size_bytes: Type.Integer(),
    expires_at: Timestamp,
    parts: Type.Array(Ref(UploadedPart)),
  },
  { $id: 'MultipartUpload', description: 'A multipart upload session and the parts it holds' },
);

export const CompleteMultipartBody = Type.Object(
  {
    parts: Type.Array(
      Type.Object({
        part_number: Type.Integer({ minimum: 1, maximum: 10_000 }),
        etag: Type.String({ maxLength: 128 }),
      }),
      { maxItems: 10_000 },
    ),
  },
  { $id: 'CompleteMultipartUploadRequest', additionalProperties: false },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const uploadSchemas = [
  CreateUploadTokenBody,
  UploadToken,
  StartMultipartBody,
  StartedMultipartUpload,
  PartUrl,
  UploadedPart,
  MultipartUpload,
  CompleteMultipartBody,
];
