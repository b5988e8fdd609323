import { type Static, Type } from 'typebox';
import { Nullable } from '../../http/schemas.ts';

const Count = (description: string) => Type.Integer({ minimum: 0, description });

const Bucket = Type.Object({ files: Count('Files'), bytes: Count('Their size_bytes, summed') });

export const Usage = Type.Object(
  {
    project_id: Type.String(),
    storage: Type.Object({
      quota_bytes: Nullable(Type.Integer({ description: 'The max_storage_bytes setting; null: no limit' })),
      used_bytes: Count(
        'Bytes held until the collector removes them: processing, ready, failed and quarantined files, deleted files not yet collected, and versions.bytes',
      ),
      reserved_bytes: Count(
        'Bytes declared by uploads in flight: uploading files and versions.reserved_bytes. An upload is admitted while used_bytes + reserved_bytes + its size stay within quota_bytes',
      ),
    }),
    files: Type.Object({
      quota: Nullable(Type.Integer({ description: 'The max_files setting; null: no limit' })),
      used: Count('Files counted against the quota: uploading, processing, ready and deleted'),
      by_status: Type.Object(
        {
          uploading: Bucket,
          processing: Bucket,
          ready: Bucket,
          failed: Bucket,
          quarantined: Bucket,
          deleted: Bucket,
        },
        {
          description:
            'Files not deleted by status, and deleted files (of any status) the collector has not removed yet',
        },
      ),
    }),
    versions: Type.Object({
      bytes: Count(
        'Objects of earlier versions (each once, the current content is the file) and new versions being checked',
      ),
      reserved_bytes: Count('New versions being uploaded'),
    }),
  },
  {
    $id: 'ProjectUsage',
    description: 'What a project holds, against its quotas; exact at the moment it is read',
  },
);
export type Usage = Static<typeof Usage>;

export const usageSchemas = [Usage];
