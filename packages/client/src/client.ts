/** The client: the API resources and uploads over one credential, for a platform (browser or Node.js). */
import { type Api, createApi, type Fetch, type RequestOptions } from './api.js';
import { invalidInput } from './errors.js';
import { planUpload, type UploadOptions } from './plan.js';
import { type FilesApi, filesApi } from './resources/files.js';
import { type FoldersApi, foldersApi } from './resources/folders.js';
import {
  type ApiKeysApi,
  apiKeysApi,
  type OrganizationsApi,
  organizationsApi,
  whoami,
} from './resources/management.js';
import {
  type MetadataSchemaApi,
  metadataSchemaApi,
  type ProjectsApi,
  projectsApi,
  type UploadTokensApi,
  uploadTokensApi,
} from './resources/projects.js';
import { type VersionsApi, versionsApi } from './resources/versions.js';
import { type WebhooksApi, webhooksApi } from './resources/webhooks.js';
import type { ResumeStore } from './resume.js';
import { type RetryOptions, retryPolicy } from './retry.js';
import type { UploadSource } from './source.js';
import type { PutTransport } from './transport.js';
import type { FileObject, Identity } from './types.js';
import { upload } from './upload.js';

export interface ClientOptions {
  /** Where Coffer answers, e.g. https://files.example.com (without /v1). */
  baseUrl: string;
  /** A project API key (coffer_live_…) or the admin key. */
  apiKey?: string;
  /** An upload token (coffer_upload_token_…), for browsers. */
  token?: string;
  /** Gives a new token when the server answers 401 TOKEN_EXPIRED; the request is then sent again once. */
  refreshToken?: () => string | Promise<string>;
  /** The fetch of API calls (and of uploads where XMLHttpRequest is absent); default globalThis.fetch. */
  fetch?: Fetch;
  /** Retries of network failures and 5xx, for API calls and uploads alike. */
  retry?: RetryOptions;
  /** Headers added to every API call (never to presigned URLs). */
  headers?: Record<string, string>;
}

export interface CofferClient<Input> {
  /** Uploads a file (single or multipart by size) and answers it once confirmed or completed. */
  upload(projectId: string, input: Input, options?: UploadOptions): Promise<FileObject>;
  files: FilesApi;
  folders: FoldersApi;
  versions: VersionsApi<Input>;
  webhooks: WebhooksApi;
  uploadTokens: UploadTokensApi;
  projects: ProjectsApi;
  metadataSchema: MetadataSchemaApi;
  organizations: OrganizationsApi;
  apiKeys: ApiKeysApi;
  /** What the credential is: its kind, its project (null for the admin key) and its scopes. */
  whoami(options?: RequestOptions): Promise<Identity>;
  /** Any operation of the API by its OpenAPI path, typed from the document. */
  request: Api['call'];
  /** The credential (API key or token) of the requests from now on. */
  setToken(token: string): void;
}

/** What differs between browsers and Node.js. */
export interface Platform<Input> {
  /** The bytes of an input; `size` is the caller's (required for streams). */
  source(input: Input, size: number | undefined): Promise<UploadSource>;
  transport(fetch: Fetch): PutTransport;
  /** The store of resumable uploads when the caller names none. */
  resumeStore(): ResumeStore;
}

export function createCofferClient<Input>(
  options: ClientOptions,
  platform: Platform<Input>,
): CofferClient<Input> {
  if (!options?.baseUrl) throw invalidInput('baseUrl is required');
  const fetch: Fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init));
  const api = createApi({
    baseUrl: options.baseUrl,
    fetch,
    retry: retryPolicy(options.retry),
    headers: options.headers,
    token: options.apiKey ?? options.token,
    refreshToken: options.refreshToken,
  });
  const put = platform.transport(fetch);
  let resumeStore: ResumeStore | undefined;
  const context = { api, put, resumeStore: () => (resumeStore ??= platform.resumeStore()) };
  return {
    async upload(projectId, input, uploadOptions = {}) {
      const source = await platform.source(input, uploadOptions.size);
      return upload(context, planUpload(projectId, source, uploadOptions));
    },
    files: filesApi(api),
    folders: foldersApi(api),
    versions: versionsApi(api, { put, source: platform.source }),
    webhooks: webhooksApi(api),
    uploadTokens: uploadTokensApi(api),
    projects: projectsApi(api),
    metadataSchema: metadataSchemaApi(api),
    organizations: organizationsApi(api),
    apiKeys: apiKeysApi(api),
    whoami: (options) => whoami(api, options),
    request: api.call,
    setToken: api.setToken,
  };
}
