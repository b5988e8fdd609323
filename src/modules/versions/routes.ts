import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { Ref } from '../../http/schemas.ts';
import { auditContext } from '../audit/service.ts';
import { DownloadQuery, DownloadResponse, FileObject } from '../files/schemas.ts';
import {
  ConfirmedVersionUpload,
  FileVersionList,
  InitiatedVersionUpload,
  InitiateVersionUploadBody,
} from './schemas.ts';
import type { VersionService } from './service.ts';

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
          operationId: 'listFileVersions',
          summary: 'List versions, newest first',
          description: versioning,
          params: FileParams,
          response: { 200: Ref(FileVersionList), ...errors('NOT_FOUND', 'CONFLICT', 'VERSIONING_DISABLED') },
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
          operationId: 'downloadFileVersion',
          summary: 'Get a download URL for a version',
          description: `Same TTL rules as the file download. ${versioning}`,
          params: VersionParams,
          querystring: DownloadQuery,
          response: {
            200: Ref(DownloadResponse),
            ...errors('NOT_FOUND', 'CONFLICT', 'VERSIONING_DISABLED', 'INVALID_STATE', 'VALIDATION_ERROR'),
          },
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
          operationId: 'restoreFileVersion',
          summary: 'Restore a version',
          description: `Copies storage_key, size_bytes and content_type of the version onto the file and records the restore as a new version. The status is unchanged. ${versioning}`,
          params: VersionParams,
          response: {
            200: Ref(FileObject),
            ...errors('NOT_FOUND', 'CONFLICT', 'VERSIONING_DISABLED', 'INVALID_STATE', 'QUOTA_EXCEEDED'),
          },
        },
      },
      async (request) =>
        versions.restore(request, request.params.file_id, request.params.version_id, auditContext(request)),
    );

    app.post(
      '/projects/:project_id/files/:file_id/versions',
      {
        config: { access: 'files:upload' },
        schema: {
          tags,
          operationId: 'initiateVersionUpload',
          summary: 'Upload new content for a file',
          description: `Returns a presigned URL for the new bytes (PUT them with the given Content-Type), then call the confirm endpoint with version_id. The current content stays downloadable until the new content is confirmed and, when the project scans uploads, has passed the pipeline; it then becomes the current content and a version. Only for ready files; size_bytes is reserved against max_storage_bytes (403 QUOTA_EXCEEDED). ${versioning}`,
          params: FileParams,
          body: Ref(InitiateVersionUploadBody),
          response: {
            201: Ref(InitiatedVersionUpload),
            ...errors(
              'NOT_FOUND',
              'CONFLICT',
              'VERSIONING_DISABLED',
              'INVALID_STATE',
              ...BODY_ERRORS,
              'FILE_TOO_LARGE',
              'QUOTA_EXCEEDED',
            ),
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
          operationId: 'confirmVersionUpload',
          summary: 'Confirm new content for a file',
          description:
            'committed: the bytes are now the current content and a version. processing: they become current once the scan passes, unless newer content of the file became current first (then they fail, `superseded`, and are not kept); failed or quarantined content never replaces the file. 409 CONFLICT: newer content of the file was committed first; these bytes are not kept.',
          params: VersionParams,
          response: {
            200: Ref(ConfirmedVersionUpload),
            ...errors(
              'NOT_FOUND',
              'CONFLICT',
              'VERSIONING_DISABLED',
              'INVALID_STATE',
              'VALIDATION_ERROR',
              'FILE_TOO_LARGE',
              'QUOTA_EXCEEDED',
              'STORE_UNAVAILABLE',
            ),
          },
        },
      },
      async (request) => versions.confirmContent(request, request.params.file_id, request.params.version_id),
    );
  };
}
