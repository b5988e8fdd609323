import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { NoContent, ProjectParams, Ref } from '../../http/schemas.ts';
import { auditContext } from '../audit/service.ts';
import {
  CreatedS3Credential,
  CreateS3CredentialBody,
  CreateTemporaryS3CredentialsBody,
  S3CredentialList,
  TemporaryS3Credentials,
} from './schemas.ts';
import type { S3CredentialService } from './service.ts';

const tags = ['S3 credentials'];
export function s3CredentialRoutes(credentials: S3CredentialService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/projects/:project_id/s3-credentials',
      {
        config: { access: 'admin' },
        schema: {
          tags,
          operationId: 'createS3Credential',
          summary: 'Create an S3 credential',
          description:
            "An access key id and secret for the project's bucket on the S3 endpoint (/s3), with the scopes given: files:read (GetObject, HeadObject, ListObjects, GetObjectTagging, the source of a copy), files:upload (PutObject, multipart, CopyObject, UploadPartCopy, PutObjectTagging, DeleteObjectTagging), files:delete (DeleteObject). The secret is returned only in this response.",
          params: ProjectParams,
          body: Ref(CreateS3CredentialBody),
          response: { 201: Ref(CreatedS3Credential), ...errors('NOT_FOUND', ...BODY_ERRORS) },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(
            await credentials.create(
              request.project.id,
              request.body.name,
              request.body.scopes,
              auditContext(request),
            ),
          ),
    );

    app.get(
      '/projects/:project_id/s3-credentials',
      {
        config: { access: 'admin' },
        schema: {
          tags,
          operationId: 'listS3Credentials',
          summary: 'List S3 credentials',
          description: 'Newest first, revoked ones included; never their secrets.',
          params: ProjectParams,
          response: { 200: Ref(S3CredentialList), ...errors('NOT_FOUND') },
        },
      },
      async (request) => {
        const items = await credentials.list(request.project.id);
        return { items, total: items.length };
      },
    );

    app.delete(
      '/projects/:project_id/s3-credentials/:credential_id',
      {
        config: { access: 'admin' },
        schema: {
          tags,
          operationId: 'revokeS3Credential',
          summary: 'Revoke an S3 credential',
          description: 'The credential is refused at once.',
          params: Type.Object({ project_id: Type.String(), credential_id: Type.String() }),
          response: { 204: NoContent, ...errors('NOT_FOUND') },
        },
      },
      async (request, reply) => {
        await credentials.revoke(request.project.id, request.params.credential_id, auditContext(request));
        return reply.code(204).send();
      },
    );

    app.post(
      '/projects/:project_id/s3-credentials/temporary',
      {
        config: {
          access: 'authenticated',
          uploadToken: true,
          requirement: 'an upload token or an API key (any scope) of the project',
        },
        schema: {
          tags,
          operationId: 'createTemporaryS3Credentials',
          summary: 'Create temporary S3 credentials',
          description:
            "S3 credentials acting as the upload token (with every constraint of it) or API key (with its scopes) of the request, sent with X-Amz-Security-Token: the session token. They expire after expires_in seconds (default 3600), never after the upload token, and stop working as soon as the token expires or the key is revoked. The admin key is refused (403 INSUFFICIENT_SCOPE): it creates S3 credentials instead. The project's IP allowlist applies.",
          params: ProjectParams,
          body: Ref(CreateTemporaryS3CredentialsBody),
          response: { 201: Ref(TemporaryS3Credentials), ...errors('NOT_FOUND', ...BODY_ERRORS) },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(
            await credentials.createTemporary(
              { principal: request.principal, project: request.project },
              request.body.expires_in,
              auditContext(request),
            ),
          ),
    );
  };
}
