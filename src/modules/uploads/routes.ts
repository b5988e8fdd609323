import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ErrorCode } from '../../domain/errors.ts';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { NoContent, ProjectParams, Ref } from '../../http/schemas.ts';
import { MAX_PART_NUMBER, MAX_PART_SIZE } from '../../infra/storage/object-store.ts';
import { auditContext } from '../audit/service.ts';
import { FileObject, FileParams, InitiateBody, InitiateResponse, UrlTtl } from '../files/schemas.ts';
import type { MultipartService } from './multipart.ts';
import {
  CompleteMultipartBody,
  CreateUploadTokenBody,
  MultipartUpload,
  PartUrl,
  StartedMultipartUpload,
  StartMultipartBody,
  UploadToken,
} from './schemas.ts';
import type { UploadService } from './service.ts';
import type { UploadTokenService } from './tokens.ts';

/** What finishing an upload may answer: its bytes are checked against what it declared and the quotas. */
const FINISHING_ERRORS: ErrorCode[] = [
  'NOT_FOUND',
  'CONFLICT',
  'INVALID_STATE',
  'VALIDATION_ERROR',
  'FILE_TOO_LARGE',
  'QUOTA_EXCEEDED',
  'STORE_UNAVAILABLE',
];
const tags = ['Uploads'];
const SessionParams = Type.Object({ project_id: Type.String(), upload_id: Type.String() });

export function uploadRoutes(
  uploads: UploadService,
  tokens: UploadTokenService,
  multipart: MultipartService,
): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/projects/:project_id/upload-tokens',
      {
        config: { access: 'upload_tokens:create' },
        schema: {
          tags,
          operationId: 'createUploadToken',
          summary: 'Create an upload token for a browser',
          description:
            'The browser sends it as Authorization: Bearer on initiate, confirm, multipart and get-file. Its constraints never exceed the project settings (422 otherwise) and are enforced on every upload.',
          params: ProjectParams,
          body: Ref(CreateUploadTokenBody),
          response: { 201: Ref(UploadToken), ...errors('NOT_FOUND', ...BODY_ERRORS) },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await tokens.create(request.project, request.body, auditContext(request))),
    );

    app.post(
      '/projects/:project_id/files/upload',
      {
        config: { access: 'files:upload', uploadToken: true },
        schema: {
          tags,
          operationId: 'initiateUpload',
          summary: 'Initiate an upload',
          description:
            'Creates the file (status uploading) and returns a presigned URL. PUT exactly size_bytes bytes to it with the declared Content-Type and no Authorization header, then call confirm. size_bytes is reserved against the project quotas (403 QUOTA_EXCEEDED when it would pass max_storage_bytes or max_files).',
          params: ProjectParams,
          body: Ref(InitiateBody),
          response: {
            201: Ref(InitiateResponse),
            ...errors('NOT_FOUND', ...BODY_ERRORS, 'FILE_TOO_LARGE', 'QUOTA_EXCEEDED', 'TOKEN_LIMIT_REACHED'),
          },
        },
      },
      async (request, reply) => reply.code(201).send(await uploads.initiate(request, request.body)),
    );

    app.post(
      '/projects/:project_id/files/:file_id/confirm',
      {
        config: { access: 'files:upload', uploadToken: true },
        schema: {
          tags,
          operationId: 'confirmUpload',
          summary: 'Confirm an upload',
          description:
            'Checks that the object exists with the declared size; the file becomes ready, or processing when the project scans uploads. 409 INVALID_STATE otherwise.',
          params: FileParams,
          response: { 200: Ref(FileObject), ...errors(...FINISHING_ERRORS) },
        },
      },
      async (request) => uploads.confirm(request, request.params.file_id),
    );

    const multipartAccess = { access: 'files:upload' as const, uploadToken: true };

    app.post(
      '/projects/:project_id/files/upload/multipart/start',
      {
        config: multipartAccess,
        schema: {
          tags,
          operationId: 'startMultipartUpload',
          summary: 'Start a multipart upload',
          description:
            'For files over 100 MB or uploads that must survive an interruption. The same token and project checks as initiate apply to total_size_bytes.',
          params: ProjectParams,
          body: Ref(StartMultipartBody),
          response: {
            201: Ref(StartedMultipartUpload),
            ...errors(
              'NOT_FOUND',
              ...BODY_ERRORS,
              'FILE_TOO_LARGE',
              'QUOTA_EXCEEDED',
              'TOKEN_LIMIT_REACHED',
              'STORE_UNAVAILABLE',
            ),
          },
        },
      },
      async (request, reply) => reply.code(201).send(await multipart.start(request, request.body)),
    );

    app.get(
      '/projects/:project_id/files/upload/multipart/:upload_id/part-url',
      {
        config: multipartAccess,
        schema: {
          tags,
          operationId: 'getPartUrl',
          summary: 'Get a presigned URL for one part',
          description:
            'PUT the part bytes to the URL and keep the ETag header of the answer for complete. Uploading a part again replaces it.',
          params: SessionParams,
          querystring: Type.Object({
            // A readable number outside the range is a 422 naming `part`; an unreadable one a 400.
            part: Type.Integer({ minimum: 1, maximum: MAX_PART_NUMBER, description: '1 to 10000' }),
            ttl: UrlTtl,
            size: Type.Optional(
              Type.Integer({
                minimum: 0,
                maximum: MAX_PART_SIZE,
                description:
                  'Bytes of this part: the URL then takes exactly that many. Required on the S3 store, where part URLs are signed for their size; the parts of an upload can be granted at most twice its total_size_bytes.',
              }),
            ),
          }),
          response: {
            200: Ref(PartUrl),
            ...errors(
              'NOT_FOUND',
              'INVALID_STATE',
              'VALIDATION_ERROR',
              'REQUEST_TOO_LARGE',
              'STORE_UNAVAILABLE',
            ),
          },
        },
      },
      async (request) =>
        multipart.partUrl(
          request,
          request.params.upload_id,
          request.query.part,
          request.query.ttl,
          request.query.size,
        ),
    );

    app.get(
      '/projects/:project_id/files/upload/multipart/:upload_id',
      {
        config: multipartAccess,
        schema: {
          tags,
          operationId: 'getMultipartUpload',
          summary: 'List the uploaded parts (to resume)',
          params: SessionParams,
          response: { 200: Ref(MultipartUpload), ...errors('NOT_FOUND', 'STORE_UNAVAILABLE') },
        },
      },
      async (request) => multipart.describe(request, request.params.upload_id),
    );

    app.post(
      '/projects/:project_id/files/upload/multipart/:upload_id/complete',
      {
        config: multipartAccess,
        schema: {
          tags,
          operationId: 'completeMultipartUpload',
          summary: 'Complete a multipart upload',
          description:
            'Parts ascending and unique, each ETag as uploaded, every part but the last at least 5 MiB, sizes adding up to total_size_bytes (422 naming the part otherwise). The file then becomes ready, or processing when the project scans uploads.',
          params: SessionParams,
          body: Ref(CompleteMultipartBody),
          response: { 200: Ref(FileObject), ...errors(...FINISHING_ERRORS, ...BODY_ERRORS, 'STORAGE_FULL') },
        },
      },
      async (request) => multipart.complete(request, request.params.upload_id, request.body.parts),
    );

    app.delete(
      '/projects/:project_id/files/upload/multipart/:upload_id',
      {
        config: multipartAccess,
        schema: {
          tags,
          operationId: 'abortMultipartUpload',
          summary: 'Abort a multipart upload',
          description: 'Discards the uploaded parts; the file becomes failed.',
          params: SessionParams,
          response: { 204: NoContent, ...errors('NOT_FOUND', 'INVALID_STATE', 'STORE_UNAVAILABLE') },
        },
      },
      async (request, reply) => {
        await multipart.abort(request, request.params.upload_id);
        return reply.code(204).send();
      },
    );
  };
}
