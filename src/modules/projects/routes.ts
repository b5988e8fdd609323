import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorBody, ItemList, NoContent, ProjectParams } from '../../http/schemas.ts';
import {
  ApiKey,
  CreateApiKeyBody,
  CreateOrganizationBody,
  CreateProjectBody,
  Organization,
  Project,
  UpdateProjectBody,
} from './schemas.ts';
import type { ProjectService } from './service.ts';

const errors = { default: ErrorBody };

export function projectRoutes(projects: ProjectService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/organizations',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          summary: 'Create an organization',
          body: CreateOrganizationBody,
          response: { 201: Organization, ...errors },
        },
      },
      async (request, reply) => reply.code(201).send(await projects.createOrganization(request.body.name)),
    );

    app.get(
      '/organizations',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          summary: 'List organizations',
          response: { 200: ItemList(Organization), ...errors },
        },
      },
      async () => {
        const items = await projects.listOrganizations();
        return { items, total: items.length };
      },
    );

    app.post(
      '/organizations/:org_id/projects',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          summary: 'Create a project',
          params: Type.Object({ org_id: Type.String() }),
          body: CreateProjectBody,
          response: { 201: Project, ...errors },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(
            await projects.createProject(request.params.org_id, request.body.name, request.body.settings),
          ),
    );

    app.get(
      '/projects/:project_id',
      {
        config: { access: 'projects:read' },
        schema: {
          tags: ['Management'],
          summary: 'Get a project',
          params: ProjectParams,
          response: { 200: Project, ...errors },
        },
      },
      async (request) => request.project,
    );

    app.patch(
      '/projects/:project_id',
      {
        config: { access: 'projects:update' },
        schema: {
          tags: ['Management'],
          summary: 'Update a project',
          description: 'Partial update: only the given fields and settings change.',
          params: ProjectParams,
          body: UpdateProjectBody,
          response: { 200: Project, ...errors },
        },
      },
      async (request) => projects.updateProject(request.project.id, request.body),
    );

    app.post(
      '/projects/:project_id/api-keys',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          summary: 'Create an API key',
          description: 'The key is returned only in this response; only its hash is stored.',
          params: ProjectParams,
          body: CreateApiKeyBody,
          response: { 201: Type.Object({ ...ApiKey.properties, key: Type.String() }), ...errors },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(await projects.createApiKey(request.project.id, request.body.name, request.body.scopes)),
    );

    app.get(
      '/projects/:project_id/api-keys',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          summary: 'List API keys',
          params: ProjectParams,
          response: { 200: ItemList(ApiKey), ...errors },
        },
      },
      async (request) => {
        const items = await projects.listApiKeys(request.project.id);
        return { items, total: items.length };
      },
    );

    app.delete(
      '/projects/:project_id/api-keys/:key_id',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          summary: 'Revoke an API key',
          description: 'The key stops working at once.',
          params: Type.Object({ project_id: Type.String(), key_id: Type.String() }),
          response: { 204: NoContent, ...errors },
        },
      },
      async (request, reply) => {
        await projects.revokeApiKey(request.project.id, request.params.key_id);
        return reply.code(204).send();
      },
    );
  };
}
