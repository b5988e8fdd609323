import type { Api, RequestOptions } from '../api.js';
import type { CreateFolderRequest, Folder, FolderList, UpdateFolderRequest } from '../types.js';

export interface FoldersApi {
  /** Names are unique among siblings (409 CONFLICT). */
  create(projectId: string, folder: CreateFolderRequest, options?: RequestOptions): Promise<Folder>;
  /** The folders under `parent_id`, or at the root without it. */
  list(projectId: string, query?: { parent_id?: string }, options?: RequestOptions): Promise<FolderList>;
  get(projectId: string, folderId: string, options?: RequestOptions): Promise<Folder>;
  /** Rename, or move with `parent_id` (null: the root). */
  update(
    projectId: string,
    folderId: string,
    changes: UpdateFolderRequest,
    options?: RequestOptions,
  ): Promise<Folder>;
  /** Only an empty folder (409 CONFLICT otherwise). */
  delete(projectId: string, folderId: string, options?: RequestOptions): Promise<void>;
}

export function foldersApi(api: Api): FoldersApi {
  const ids = (project_id: string, folder_id: string) => ({ project_id, folder_id });
  return {
    create: (projectId, folder, options = {}) =>
      api.call('post', '/v1/projects/{project_id}/folders', {
        params: { project_id: projectId },
        body: folder,
        ...options,
      }),
    list: (projectId, query = {}, options = {}) =>
      api.call('get', '/v1/projects/{project_id}/folders', {
        params: { project_id: projectId },
        query,
        ...options,
      }),
    get: (projectId, folderId, options = {}) =>
      api.call('get', '/v1/projects/{project_id}/folders/{folder_id}', {
        params: ids(projectId, folderId),
        ...options,
      }),
    update: (projectId, folderId, changes, options = {}) =>
      api.call('patch', '/v1/projects/{project_id}/folders/{folder_id}', {
        params: ids(projectId, folderId),
        body: changes,
        ...options,
      }),
    delete: async (projectId, folderId, options = {}) => {
      await api.call('delete', '/v1/projects/{project_id}/folders/{folder_id}', {
        params: ids(projectId, folderId),
        ...options,
      });
    },
  };
}
