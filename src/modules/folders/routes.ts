import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { BODY_ERRORS, errors } from '../../http/error-responses.ts';
import { NoContent, ProjectParams, Ref } from '../../http/schemas.ts';
import { CreateFolderBody, Folder, FolderList, UpdateFolderBody } from './schemas.ts';
import type { FolderService } from './service.ts';

const FolderParams = Type.Object({ project_id: Type.String(), folder_id: Type.String() });
const tags = ['Folders'];

export function folderRoutes(folders: FolderService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/projects/:project_id/folders',
      {
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          operationId: 'createFolder',
          summary: 'Create a folder',
          description: 'Names are unique among siblings (409 CONFLICT).',
          params: ProjectParams,
          body: Ref(CreateFolderBody),
          response: { 201: Ref(Folder), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(await folders.create(request.project.id, request.body.name, request.body.parent_id)),
    );

    app.get(
      '/projects/:project_id/folders',
      {
        config: { access: 'files:read' },
        schema: {
          tags,
          operationId: 'listFolders',
          summary: 'List the folders of a parent (the root when parent_id is absent)',
          params: ProjectParams,
          querystring: Type.Object({ parent_id: Type.Optional(Type.String()) }),
          response: { 200: Ref(FolderList), ...errors('NOT_FOUND') },
        },
      },
      async (request) => {
        const items = await folders.list(request.project.id, request.query.parent_id);
        return { items, total: items.length };
      },
    );

    app.get(
      '/projects/:project_id/folders/:folder_id',
      {
        config: { access: 'files:read' },
        schema: {
          tags,
          operationId: 'getFolder',
          summary: 'Get a folder',
          params: FolderParams,
          response: { 200: Ref(Folder), ...errors('NOT_FOUND') },
        },
      },
      async (request) => folders.get(request.project.id, request.params.folder_id),
    );

    app.patch(
      '/projects/:project_id/folders/:folder_id',
      {
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          operationId: 'updateFolder',
          summary: 'Rename or move a folder',
          description: 'parent_id null moves it to the root. The paths of the whole subtree follow.',
          params: FolderParams,
          body: Ref(UpdateFolderBody),
          response: { 200: Ref(Folder), ...errors('NOT_FOUND', 'CONFLICT', ...BODY_ERRORS) },
        },
      },
      async (request) => folders.update(request.project.id, request.params.folder_id, request.body),
    );

    app.delete(
      '/projects/:project_id/folders/:folder_id',
      {
        config: { access: 'files:update_metadata' },
        schema: {
          tags,
          operationId: 'deleteFolder',
          summary: 'Delete an empty folder',
          description: '409 CONFLICT while it holds subfolders or files.',
          params: FolderParams,
          response: { 204: NoContent, ...errors('NOT_FOUND', 'CONFLICT') },
        },
      },
      async (request, reply) => {
        await folders.remove(request.project.id, request.params.folder_id);
        return reply.code(204).send();
      },
    );
  };
}
