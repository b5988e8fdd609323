import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { NoContent, ProjectParams, Ref } from '../../http/schemas.ts';
import { auditContext } from '../audit/service.ts';
import { MetadataSchema, SetMetadataSchemaBody } from './schemas.ts';
import type { MetadataSchemaService } from './service.ts';

const tags = ['Metadata schema'];

export function metadataSchemaRoutes(schemas: MetadataSchemaService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.put(
      '/projects/:project_id/metadata-schema',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'setMetadataSchema',
          summary: 'Set the metadata schema',
          description:
            'With enforce_schema on and is_active true, every metadata write (initiate included) is validated against it; a mismatch is 422.',
          params: ProjectParams,
          body: Ref(SetMetadataSchemaBody),
          response: { 200: Ref(MetadataSchema), ...errors('NOT_FOUND', ...BODY_ERRORS) },
        },
      },
      async (request) =>
        schemas.put(request.project.id, request.body.schema, request.body.is_active, auditContext(request)),
    );
    app.get(
      '/projects/:project_id/metadata-schema',
      {
        config: { access: 'projects:read' },
        schema: {
          tags,
          operationId: 'getMetadataSchema',
          summary: 'Get the metadata schema',
          params: ProjectParams,
          response: { 200: Ref(MetadataSchema), ...errors('NOT_FOUND') },
        },
      },
      async (request) => schemas.get(request.project.id),
    );
    app.delete(
      '/projects/:project_id/metadata-schema',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          operationId: 'deleteMetadataSchema',
          summary: 'Remove the metadata schema',
          params: ProjectParams,
          response: { 204: NoContent, ...errors('NOT_FOUND') },
        },
      },
      async (request, reply) => {
        await schemas.remove(request.project.id, auditContext(request));
        return reply.code(204).send();
      },
    );
  };
}
