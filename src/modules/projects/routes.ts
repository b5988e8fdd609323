import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { adminOnlySetting } from '../../domain/errors.ts';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { NoContent, ProjectParams, Ref } from '../../http/schemas.ts';
import { auditContext } from '../audit/service.ts';
import {
  ApiKeyList,
  CreateApiKeyBody,
  CreatedApiKey,
  CreateOrganizationBody,
  CreateProjectBody,
  Identity,
  Organization,
  OrganizationList,
  Project,
  ProjectList,
  SCOPES,
  UpdateProjectBody,
} from './schemas.ts';
import type { ProjectService } from './service.ts';

/** Settings that bound a tenant: set by the operator (admin key), never by the project's own keys. */
const OPERATOR_SETTINGS = ['rate_limit_per_minute', 'max_storage_bytes', 'max_files'] as const;

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
          response: { 201: Ref(Organization), ...errors(...BODY_ERRORS) },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await projects.createOrganization(request.body.name, auditContext(request))),
    );

    app.get(
      '/organizations',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          operationId: 'listOrganizations',
          summary: 'List organizations',
          response: { 200: Ref(OrganizationList), ...errors() },
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
          response: { 201: Ref(Project), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(await projects.createProject(request.params.org_id, request.body, auditContext(request))),
    );

    app.get(
      '/organizations/:org_id/projects',
      {
        config: { access: 'admin' },
        schema: {
          tags: ['Management'],
          operationId: 'listProjects',
          summary: "List an organization's projects",
          description: 'Newest first.',
          params: Type.Object({ org_id: Type.String() }),
          response: { 200: Ref(ProjectList), ...errors('NOT_FOUND') },
        },
      },
      async (request) => {
        const items = await projects.listProjects(request.params.org_id);
        return { items, total: items.length };
      },
    );

    app.get(
      '/whoami',
      {
        config: { access: 'authenticated', uploadToken: true },
        schema: {
          tags: ['Management'],
          operationId: 'whoami',
          summary: 'Describe the credential of the request',
          description:
            "Its kind, its project and its scopes: what a console or a CLI needs to know after signing in with a key. The project's IP allowlist applies.",
          response: { 200: Ref(Identity), ...errors('NOT_FOUND') },
        },
      },
      async (request) => {
        const { principal } = request;
        return principal.kind === 'admin'
          ? { kind: principal.kind, project_id: null, scopes: [...SCOPES] }
          : { kind: principal.kind, project_id: principal.projectId, scopes: principal.scopes };
      },
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
          response: { 200: Ref(Project), ...errors('NOT_FOUND') },
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
          description:
            'Partial update: only the given fields and settings change. The `bucket` and the limits `settings.rate_limit_per_minute`, `max_storage_bytes` and `max_files` change with the admin key only (403 INSUFFICIENT_SCOPE otherwise).',
          params: ProjectParams,
          body: Ref(UpdateProjectBody),
          response: { 200: Ref(Project), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
      },
      async (request) => {
        // A tenant does not lift its own limits: the operator sets them.
        if (request.principal.kind !== 'admin') {
          // The bucket is the project's name on the server, among every tenant's: the operator's too.
          const { bucket } = request.body;
          if (bucket !== undefined && bucket !== request.project.bucket) throw adminOnlySetting('bucket');
          for (const name of OPERATOR_SETTINGS) {
            const value = request.body.settings?.[name];
            if (value !== undefined && value !== request.project.settings[name])
              throw adminOnlySetting(`settings.${name}`);
          }
        }
        return projects.updateProject(request.project.id, request.body, auditContext(request));
      },
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
          response: { 201: Ref(CreatedApiKey), ...errors('NOT_FOUND', ...BODY_ERRORS) },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(
            await projects.createApiKey(
              request.project.id,
              request.body.name,
              request.body.scopes,
              auditContext(request),
            ),
          ),
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
          response: { 200: Ref(ApiKeyList), ...errors('NOT_FOUND') },
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
          response: { 204: NoContent, ...errors('NOT_FOUND') },
        },
      },
      async (request, reply) => {
        await projects.revokeApiKey(request.project.id, request.params.key_id, auditContext(request));
        return reply.code(204).send();
      },
    );
  };
}
