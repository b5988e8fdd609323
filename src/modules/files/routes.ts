import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { ProjectParams, Ref } from '../../http/schemas.ts';
import { auditContext } from '../audit/service.ts';
import { asksRendition } from '../renditions/params.ts';
import type { RenditionService } from '../renditions/service.ts';
import {
  DownloadQuery,
  DownloadResponse,
  FileList,
  FileObject,
  FileParams,
  LegalHoldBody,
  ListQuery,
  MetadataBody,
  MoveBody,
  TagsBody,
} from './schemas.ts';
import type { FileService } from './service.ts';

const tags = ['Files'];

export function fileRoutes(files: FileService, renditions: RenditionService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/projects/:project_id/files',
      {
        config: { access: 'files:read' },
        schema: {
          tags,
          operationId: 'listFiles',
          summary: 'List and search files',
          description:
            'Newest first. Deleted files are never listed. `total` counts every match regardless of pagination.',
          params: ProjectParams,
          querystring: ListQuery,
          response: { 200: Ref(FileList), ...errors('NOT_FOUND', 'VALIDATION_ERROR') },
        },
      },
      async (request) => files.list(request, request.query),
    );

    app.get(
      '/projects/:project_id/files/:file_id',
      {
        config: { access: 'files:read', uploadToken: true },
        schema: {
          tags,
          operationId: 'getFile',
          summary: 'Get a file',
          params: FileParams,
          response: { 200: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT') },
        },
      },
      async (request) => files.get(request, request.params.file_id),
    );

    app.get(
      '/projects/:project_id/files/:file_id/download',
      {
        config: { access: 'files:download' },
        schema: {
          tags,
          operationId: 'downloadFile',
          summary: 'Get a download URL',
          description:
            'Only for ready files. The URL serves the bytes as an attachment, with single-range support, until expires_at. With any rendition parameter (width, height, fit, format, quality, animated; see renderFile) it is the URL of that rendition instead, needing no key: the signature binds the parameters, and the image is served inline with a Cache-Control lasting until expires_at.',
          params: FileParams,
          querystring: DownloadQuery,
          response: {
            200: Ref(DownloadResponse),
            ...errors('NOT_FOUND', 'CONFLICT', 'INVALID_STATE', 'VALIDATION_ERROR'),
          },
        },
      },
      async (request) => {
        const { ttl, ...rendition } = request.query;
        return asksRendition(rendition)
          ? renditions.presign(request, request.params.file_id, rendition, ttl)
          : files.download(request, request.params.file_id, ttl);
      },
    );

    for (const [method, mode, operationId, summary] of [
      ['PUT', 'replace', 'replaceFileTags', 'Replace the tags'],
      ['POST', 'add', 'addFileTags', 'Add tags (union)'],
    ] as const) {
      app.route({
        method,
        url: '/projects/:project_id/files/:file_id/tags',
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          operationId,
          summary,
          params: FileParams,
          body: Ref(TagsBody),
          response: { 200: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
        handler: async (request) => files.setTags(request, request.params.file_id, request.body.tags, mode),
      });
    }

    for (const [method, mode, operationId, summary] of [
      ['PUT', 'replace', 'replaceFileMetadata', 'Replace the metadata'],
      ['POST', 'merge', 'mergeFileMetadata', 'Merge into the metadata (shallow)'],
    ] as const) {
      app.route({
        method,
        url: '/projects/:project_id/files/:file_id/metadata',
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          operationId,
          summary,
          description:
            'With enforce_schema and an active metadata schema, the resulting metadata is validated (422).',
          params: FileParams,
          body: Ref(MetadataBody),
          response: { 200: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
        handler: async (request) =>
          files.setMetadata(request, request.params.file_id, request.body.metadata, mode),
      });
    }

    app.post(
      '/projects/:project_id/files/:file_id/move',
      {
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          operationId: 'moveFile',
          summary: 'Move a file to a folder, or to the root with null',
          params: FileParams,
          body: Ref(MoveBody),
          response: { 200: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
      },
      async (request) => files.move(request, request.params.file_id, request.body.folder_id),
    );

    app.post(
      '/projects/:project_id/files/:file_id/rescan',
      {
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          operationId: 'rescanFile',
          summary: 'Scan a file again after the scanner was unavailable',
          description:
            'Only for a failed file whose failure_reason begins with scan_unavailable (the scanner stayed unreachable for COFFER_SCAN_RETRY_WINDOW_SECONDS): the file is processing again and its scan is queued; file.ready, file.failed or file.quarantined follows. Any other file: 409 INVALID_STATE.',
          params: FileParams,
          response: { 202: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT', 'INVALID_STATE') },
        },
      },
      async (request, reply) =>
        reply.code(202).send(await files.rescan(request, request.params.file_id, auditContext(request))),
    );

    app.delete(
      '/projects/:project_id/files/:file_id',
      {
        config: { access: 'files:delete' },
        schema: {
          tags,
          operationId: 'deleteFile',
          summary: 'Delete a file (soft)',
          description:
            'Sets deleted_at; the file answers 404 from then on and its stored objects are removed by a background job after the grace period. 409 LEGAL_HOLD for a held file.',
          params: FileParams,
          response: { 200: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT', 'LEGAL_HOLD') },
        },
      },
      async (request) => files.remove(request, request.params.file_id, auditContext(request)),
    );

    app.put(
      '/projects/:project_id/files/:file_id/legal-hold',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'placeLegalHold',
          summary: 'Place a legal hold',
          description: 'A held file cannot be deleted.',
          params: FileParams,
          body: Ref(LegalHoldBody),
          response: { 200: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
      },
      async (request) =>
        files.setLegalHold(request, request.params.file_id, true, request.body.reason, auditContext(request)),
    );

    app.delete(
      '/projects/:project_id/files/:file_id/legal-hold',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'releaseLegalHold',
          summary: 'Release a legal hold',
          params: FileParams,
          response: { 200: Ref(FileObject), ...errors('NOT_FOUND', 'CONFLICT') },
        },
      },
      async (request) =>
        files.setLegalHold(request, request.params.file_id, false, undefined, auditContext(request)),
    );
  };
}
