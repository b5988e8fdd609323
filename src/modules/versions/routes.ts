import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorBody, ItemList, Nullable, StringEnum, Timestamp } from '../../http/schemas.ts';
import { DownloadQuery, DownloadResponse, FileObject } from '../files/schemas.ts';
import { MAX_OBJECT_BYTES } from '../projects/schemas.ts';
import type { VersionService } from './service.ts';

const Version = Type.Object(
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
  { $id: 'FileVersion' },
);
const FileParams = Type.Object({ project_id: Type.String(), file_id: Type.String() });
const VersionParams = Type.Object({
  project_id: Type.String(),
  file_id: Type.String(),
  version_id: Type.String(),
});
const tags = ['Versions'];
const versioning = 'Requires versioning_enabled (409 VERSIONING_DISABLED otherwise).';

export function versionRoutes(versions: VersionService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/projects/:project_id/files/:file_id/versions',
      {
        config: { access: 'files:read' },
        schema: {
          tags,
          summary: 'List versions, newest first',
          description: versioning,
          params: FileParams,
          response: { 200: ItemList(Version), default: ErrorBody },
        },
      },
      async (request) => versions.list(request, request.params.file_id),
    );

    app.get(
      '/projects/:project_id/files/:file_id/versions/:version_id/download',
      {
        config: { access: 'files:download' },
        schema: {
          tags,
          summary: 'Get a download URL for a version',
          description: `Same TTL rules as the file download. ${versioning}`,
          params: VersionParams,
          querystring: DownloadQuery,
          response: { 200: DownloadResponse, default: ErrorBody },
        },
      },
      async (request) =>
        versions.download(request, request.params.file_id, request.params.version_id, request.query.ttl),
    );

    app.post(
      '/projects/:project_id/files/:file_id/versions/:version_id/restore',
      {
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          summary: 'Restore a version',
          description: `Copies storage_key, size_bytes and content_type of the version onto the file and records the restore as a new version. The status is unchanged. ${versioning}`,
          params: VersionParams,
          response: { 200: FileObject, default: ErrorBody },
        },
      },
      async (request) => versions.restore(request, request.params.file_id, request.params.version_id),
    );

    app.post(
      '/projects/:project_id/files/:file_id/versions',
      {
        config: { access: 'files:upload' },
        schema: {
          tags,
          summary: 'Upload new content for a file',
          description: `Returns a presigned URL for the new bytes (PUT them with the given Content-Type), then call the confirm endpoint with version_id. The current content stays downloadable until the new content is confirmed and, when the project scans uploads, has passed the pipeline; it then becomes the current content and a version. Only for ready files. ${versioning}`,
          params: FileParams,
          body: Type.Object(
            {
              size_bytes: Type.Integer({ minimum: 0, maximum: MAX_OBJECT_BYTES }),
              content_type: Type.Optional(
                Type.String({ maxLength: 255, description: "Default: the file's" }),
              ),
            },
            { additionalProperties: false },
          ),
          response: {
            201: Type.Object({
              version_id: Type.String(),
              file_id: Type.String(),
              upload_url: Type.String(),
              expires_at: Timestamp,
            }),
            default: ErrorBody,
          },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await versions.createContent(request, request.params.file_id, request.body)),
    );

    app.post(
      '/projects/:project_id/files/:file_id/versions/:version_id/confirm',
      {
        config: { access: 'files:upload' },
        schema: {
          tags,
          summary: 'Confirm new content for a file',
          description:
            'committed: the bytes are now the current content and a version. processing: they become current once the scan passes (failed or quarantined content never replaces the file).',
          params: VersionParams,
          response: {
            200: Type.Object({
              version_id: Type.String(),
              status: StringEnum(['committed', 'processing'] as const),
              file: FileObject,
            }),
            default: ErrorBody,
          },
        },
      },
      async (request) => versions.confirmContent(request, request.params.file_id, request.params.version_id),
    );
  };
}
