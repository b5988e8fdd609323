import { Type } from 'typebox';
import { ItemList, Nullable, Ref, StringEnum, Timestamp } from '../../http/schemas.ts';
import { ContentType, FileObject } from '../files/schemas.ts';
import { MAX_OBJECT_BYTES } from '../projects/schemas.ts';

export const FileVersion = Type.Object(
  {
    id: Type.String({ description: 'ver_…' }),
    file_id: Type.String(),
    version_number: Type.Integer({ description: '1 for the first content, counting up' }),
    storage_key: Type.String(),
    size_bytes: Type.Integer(),
    content_type: Type.String(),
    checksum_sha256: Nullable(Type.String()),
    reason: StringEnum(['upload', 'restore'] as const),
    source_version_id: Nullable(Type.String({ description: 'For a restore: the version restored' })),
    created_at: Timestamp,
  },
  { $id: 'FileVersion', description: 'A snapshot of the content of a file' },
);
export const FileVersionList = ItemList(FileVersion);

export const InitiateVersionUploadBody = Type.Object(
  {
    size_bytes: Type.Integer({ minimum: 0, maximum: MAX_OBJECT_BYTES }),
    // Default: the file's.
    content_type: Type.Optional(ContentType),
  },
  { $id: 'InitiateVersionUploadRequest', additionalProperties: false },
);

export const InitiatedVersionUpload = Type.Object(
  {
    version_id: Type.String(),
    file_id: Type.String(),
    upload_url: Type.String(),
    expires_at: Timestamp,
  },
  { $id: 'InitiatedVersionUpload', description: 'The new version and where to send its bytes' },
);

export const ConfirmedVersionUpload = Type.Object(
  {
    version_id: Type.String(),
    status: StringEnum(['committed', 'processing'] as const),
    file: Ref(FileObject),
  },
  { $id: 'ConfirmedVersionUpload', description: 'The confirmed version and the file it belongs to' },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const versionSchemas = [
  FileVersion,
  FileVersionList,
  InitiateVersionUploadBody,
  InitiatedVersionUpload,
  ConfirmedVersionUpload,
];
