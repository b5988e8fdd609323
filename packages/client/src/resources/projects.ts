import type { Api, RequestOptions } from '../api.js';
import type {
  CreateProjectRequest,
  MetadataSchema,
  Project,
  ProjectList,
  PutMetadataSchemaRequest,
  UpdateProjectRequest,
  UploadToken,
  UploadTokenRequest,
} from '../types.js';

export interface ProjectsApi {
  /** Admin key: a new project of the organization (settings not given take their defaults). */
  create(organizationId: string, project: CreateProjectRequest, options?: RequestOptions): Promise<Project>;
  /** Admin key: the organization's projects, newest first. */
  list(organizationId: string, options?: RequestOptions): Promise<ProjectList>;
  get(projectId: string, options?: RequestOptions): Promise<Project>;
  /** Partial: only the given fields and settings change. */
  update(projectId: string, changes: UpdateProjectRequest, options?: RequestOptions): Promise<Project>;
}

export interface UploadTokensApi {
  /** A token for a browser, whose constraints the server enforces on every upload made with it. */
  create(projectId: string, constraints?: UploadTokenRequest, options?: RequestOptions): Promise<UploadToken>;
}

export interface MetadataSchemaApi {
  get(projectId: string, options?: RequestOptions): Promise<MetadataSchema>;
  put(projectId: string, schema: PutMetadataSchemaRequest, options?: RequestOptions): Promise<MetadataSchema>;
  delete(projectId: string, options?: RequestOptions): Promise<void>;
}

const path = (project_id: string) => ({ project_id });

export const projectsApi = (api: Api): ProjectsApi => ({
  create: (organizationId, project, options = {}) =>
    api.call('post', '/v1/organizations/{org_id}/projects', {
      params: { org_id: organizationId },
      body: project,
      ...options,
    }),
  list: (organizationId, options = {}) =>
    api.call('get', '/v1/organizations/{org_id}/projects', {
      params: { org_id: organizationId },
      ...options,
    }),
  get: (projectId, options = {}) =>
    api.call('get', '/v1/projects/{project_id}', { params: path(projectId), ...options }),
  update: (projectId, changes, options = {}) =>
    api.call('patch', '/v1/projects/{project_id}', { params: path(projectId), body: changes, ...options }),
});

export const uploadTokensApi = (api: Api): UploadTokensApi => ({
  create: (projectId, constraints = {}, options = {}) =>
    api.call('post', '/v1/projects/{project_id}/upload-tokens', {
      params: path(projectId),
      body: constraints,
      ...options,
    }),
});

export const metadataSchemaApi = (api: Api): MetadataSchemaApi => ({
  get: (projectId, options = {}) =>
    api.call('get', '/v1/projects/{project_id}/metadata-schema', { params: path(projectId), ...options }),
  put: (projectId, schema, options = {}) =>
    api.call('put', '/v1/projects/{project_id}/metadata-schema', {
      params: path(projectId),
      body: schema,
      ...options,
    }),
  delete: async (projectId, options = {}) => {
    await api.call('delete', '/v1/projects/{project_id}/metadata-schema', {
      params: path(projectId),
      ...options,
    });
  },
});
