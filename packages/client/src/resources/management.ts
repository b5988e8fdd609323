import type { Api, RequestOptions } from '../api.js';
import type {
  ApiKeyList,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreateOrganizationRequest,
  Identity,
  Organization,
  OrganizationList,
} from '../types.js';

/** Organizations: the admin key only. */
export interface OrganizationsApi {
  create(organization: CreateOrganizationRequest, options?: RequestOptions): Promise<Organization>;
  /** Every organization, newest first. */
  list(options?: RequestOptions): Promise<OrganizationList>;
}

/** A project's API keys: the admin key only. */
export interface ApiKeysApi {
  /** The answer holds `key`, shown only this once (only its hash is stored). */
  create(projectId: string, key: CreateApiKeyRequest, options?: RequestOptions): Promise<CreatedApiKey>;
  /** Revoked keys too (with `revoked_at`), newest first; never a secret. */
  list(projectId: string, options?: RequestOptions): Promise<ApiKeyList>;
  /** The key stops working at once. */
  revoke(projectId: string, keyId: string, options?: RequestOptions): Promise<void>;
}

export const organizationsApi = (api: Api): OrganizationsApi => ({
  create: (organization, options = {}) =>
    api.call('post', '/v1/organizations', { body: organization, ...options }),
  list: (options = {}) => api.call('get', '/v1/organizations', options),
});

export const apiKeysApi = (api: Api): ApiKeysApi => ({
  create: (projectId, key, options = {}) =>
    api.call('post', '/v1/projects/{project_id}/api-keys', {
      params: { project_id: projectId },
      body: key,
      ...options,
    }),
  list: (projectId, options = {}) =>
    api.call('get', '/v1/projects/{project_id}/api-keys', { params: { project_id: projectId }, ...options }),
  revoke: async (projectId, keyId, options = {}) => {
    await api.call('delete', '/v1/projects/{project_id}/api-keys/{key_id}', {
      params: { project_id: projectId, key_id: keyId },
      ...options,
    });
  },
});

/** What the client's credential is: its kind, its project (null for the admin key) and its scopes. */
export const whoami = (api: Api, options: RequestOptions = {}): Promise<Identity> =>
  api.call('get', '/v1/whoami', options);
