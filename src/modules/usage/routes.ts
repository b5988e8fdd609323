import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errors } from '../../http/error-responses.ts';
import { ProjectParams, Ref } from '../../http/schemas.ts';
import { Usage } from './schemas.ts';
import type { UsageService } from './service.ts';

export function usageRoutes(usage: UsageService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/projects/:project_id/usage',
      {
        config: { access: 'projects:read' },
        schema: {
          tags: ['Management'],
          operationId: 'getProjectUsage',
          summary: "Get a project's usage and quotas",
          description:
            'Files and bytes by status, versions, bytes reserved by uploads in flight, and the quotas (max_storage_bytes, max_files) they are checked against. Kept in the transaction of every change, so exact when read.',
          params: ProjectParams,
          response: { 200: Ref(Usage), ...errors('NOT_FOUND') },
        },
      },
      async (request) => usage.get(request.project),
    );
  };
}
