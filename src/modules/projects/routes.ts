import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorBody, NoContent, ProjectParams, Ref } from '../../http/schemas.ts';
import {
  ApiKeyList,
  CreateApiKeyBody,
  CreatedApiKey,
  CreateOrganizationBody,
  CreateProjectBody,
  Organization,
  OrganizationList,
  Project,
  UpdateProjectBody,
} from './schemas.ts';
import type { ProjectService } from './service.ts';

const errors = { default: Ref(ErrorBody) };

export function projectRoutes(projects: ProjectService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/organizations',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          operationId: 'createOrganization',
          summary: 'Create an organization',
          body: Ref(CreateOrganizationBody),
          response: { 201: Ref(Organization), ...errors },
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
          operationId: 'listOrganizations',
          summary: 'List organizations',
          response: { 200: Ref(OrganizationList), ...errors },
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
          operationId: 'createProject',
          summary: 'Create a project',
          params: Type.Object({ org_id: Type.String() }),
          body: Ref(CreateProjectBody),
          response: { 201: Ref(Project), ...errors },
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
          operationId: 'getProject',
          summary: 'Get a project',
          params: ProjectParams,
          response: { 200: Ref(Project), ...errors },
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
          operationId: 'updateProject',
          summary: 'Update a project',
          description: 'Partial update: only the given fields and settings change.',
          params: ProjectParams,
          body: Ref(UpdateProjectBody),
          response: { 200: Ref(Project), ...errors },
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
          operationId: 'createApiKey',
          summary: 'Create an API key',
          description: 'The key is returned only in this response; only its hash is stored.',
          params: ProjectParams,
          body: Ref(CreateApiKeyBody),
          response: { 201: Ref(CreatedApiKey), ...errors },
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
          operationId: 'listApiKeys',
          summary: 'List API keys',
          params: ProjectParams,
          response: { 200: Ref(ApiKeyList), ...errors },
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
          operationId: 'revokeApiKey',
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
