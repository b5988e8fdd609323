import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorBody, Nullable, Timestamp } from '../../http/schemas.ts';
import { FileObject, FileParams, InitiateBody, InitiateResponse, ProjectParams } from '../files/schemas.ts';
import { MAX_OBJECT_BYTES } from '../projects/schemas.ts';
import type { UploadService } from './service.ts';
import type { UploadTokenService } from './tokens.ts';

const tags = ['Uploads'];
const OptionalString = Type.Optional(Nullable(Type.String({ maxLength: 255 })));

const TokenBody = Type.Object(
  {
    max_size: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_OBJECT_BYTES,
        description: 'Bytes per file; default 104857600 or the project limit',
      }),
    ),
    allowed_mime_types: Type.Optional(
      Type.Array(Type.String({ maxLength: 255 }), {
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
  { additionalProperties: false },
);
const TokenResponse = Type.Object({
  token: Type.String({ description: 'coffer_upload_token_…; shown only here' }),
  expires_at: Timestamp,
  constraints: Type.Object({
    max_size: Type.Integer(),
    allowed_mime_types: Type.Array(Type.String()),
    max_files: Type.Integer(),
  }),
  folder_id: Nullable(Type.String()),
});

export function uploadRoutes(uploads: UploadService, tokens: UploadTokenService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/projects/:project_id/upload-tokens',
      {
        config: { access: 'upload_tokens:create' },
        schema: {
          tags,
          summary: 'Create an upload token for a browser',
          description:
            'The browser sends it as Authorization: Bearer on initiate, confirm, multipart and get-file. Its constraints never exceed the project settings (422 otherwise) and are enforced on every upload.',
          params: ProjectParams,
          body: TokenBody,
          response: { 201: TokenResponse, default: ErrorBody },
        },
      },
      async (request, reply) => reply.code(201).send(await tokens.create(request.project, request.body)),
    );

    app.post(
      '/projects/:project_id/files/upload',
      {
        config: { access: 'files:upload', uploadToken: true },
        schema: {
          tags,
          summary: 'Initiate an upload',
          description:
            'Creates the file (status uploading) and returns a presigned URL. PUT exactly size_bytes bytes to it with the declared Content-Type and no Authorization header, then call confirm.',
          params: ProjectParams,
          body: InitiateBody,
          response: { 201: InitiateResponse, default: ErrorBody },
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
          summary: 'Confirm an upload',
          description:
            'Checks that the object exists with the declared size; the file becomes ready, or processing when the project scans uploads. 409 INVALID_STATE otherwise.',
          params: FileParams,
          response: { 200: FileObject, default: ErrorBody },
        },
      },
      async (request) => uploads.confirm(request, request.params.file_id),
    );
  };
}
