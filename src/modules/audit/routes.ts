import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { notFound } from '../../domain/errors.ts';
import { errors } from '../../http/error-responses.ts';
import { ProjectParams, Ref } from '../../http/schemas.ts';
import type { ProjectService } from '../projects/service.ts';
import { AuditEntryList, AuditLogQuery } from './schemas.ts';
import type { AuditService } from './service.ts';

const tags = ['Audit'];
const recorded =
  'Every management action (organizations, projects and their settings, API keys, webhooks, upload tokens, the metadata schema) and every destructive or privileged file action (delete, legal hold, version restore, rescan), newest first: who (actor_type, actor_id), from where (client_ip), in which request (request_id), on what (targets), and what changed (before, after; never a secret). Filters combine; from/to take ISO 8601 dates or timestamps. Entries are kept COFFER_AUDIT_RETENTION_DAYS days.';

export function auditRoutes(audit: AuditService, projects: ProjectService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/projects/:project_id/audit-log',
      {
        config: { access: 'audit:read' },
        schema: {
          tags,
          operationId: 'listAuditLog',
          summary: "List the project's audit log",
          description: recorded,
          params: ProjectParams,
          querystring: AuditLogQuery,
          response: { 200: Ref(AuditEntryList), ...errors('NOT_FOUND', 'VALIDATION_ERROR') },
        },
      },
      async (request) => audit.list({ projectId: request.project.id }, request.query),
    );

    app.get(
      '/organizations/:org_id/audit-log',
      {
        config: { access: 'admin' },
        schema: {
          tags,
          operationId: 'listOrganizationAuditLog',
          summary: "List an organization's audit log",
          description: `The organization's own entries (its creation) and those of all its projects. ${recorded}`,
          params: Type.Object({ org_id: Type.String() }),
          querystring: AuditLogQuery,
          response: { 200: Ref(AuditEntryList), ...errors('NOT_FOUND', 'VALIDATION_ERROR') },
        },
      },
      async (request) => {
        if (!(await projects.organizationExists(request.params.org_id))) throw notFound('Organization');
        return audit.list({ organizationId: request.params.org_id }, request.query);
      },
    );
  };
}
