import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorBody, NoContent, ProjectParams, Timestamp } from '../../http/schemas.ts';
import type { MetadataSchemaService } from './service.ts';

const Schema = Type.Object(
  {
    schema: Type.Record(Type.String(), Type.Unknown(), {
      description: 'JSON Schema 2020-12 for file metadata',
    }),
    is_active: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'MetadataSchema' },
);
const Body = Type.Object(
  { schema: Type.Record(Type.String(), Type.Unknown()), is_active: Type.Boolean({ default: true }) },
  { additionalProperties: false },
);
const tags = ['Metadata schema'];

export function metadataSchemaRoutes(schemas: MetadataSchemaService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.put(
      '/projects/:project_id/metadata-schema',
      {
        config: { access: 'projects:update' },
        schema: {
          tags,
          summary: 'Set the metadata schema',
          description:
            'With enforce_schema on and is_active true, every metadata write (initiate included) is validated against it; a mismatch is 422.',
          params: ProjectParams,
          body: Body,
          response: { 200: Schema, default: ErrorBody },
        },
      },
      async (request) => schemas.put(request.project.id, request.body.schema, request.body.is_active),
    );
    app.get(
      '/projects/:project_id/metadata-schema',
      {
        config: { access: 'projects:read' },
        schema: {
          tags,
          summary: 'Get the metadata schema',
          params: ProjectParams,
          response: { 200: Schema, default: ErrorBody },
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
          summary: 'Remove the metadata schema',
          params: ProjectParams,
          response: { 204: NoContent, default: ErrorBody },
        },
      },
      async (request, reply) => {
        await schemas.remove(request.project.id);
        return reply.code(204).send();
      },
    );
  };
}
