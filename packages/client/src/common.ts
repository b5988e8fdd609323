/** What both entries export besides createClient. */
export type { Fetch, RequestOptions } from './api.js';
export type { ClientOptions, CofferClient } from './client.js';
export { type ClientErrorCode, CofferError, type CofferErrorInit, isCofferError } from './errors.js';
export type { BodyOf, Method, MethodOf, ParamsOf, Path, QueryOf, ResponseOf } from './openapi.js';
export {
  DEFAULT_CONCURRENCY,
  DEFAULT_MULTIPART_THRESHOLD,
  DEFAULT_PART_SIZE,
  MIN_PART_SIZE,
  type UploadOptions,
} from './plan.js';
export type { Progress, ProgressListener } from './progress.js';
export type { DownloadOptions, FilesApi, RenditionOptions } from './resources/files.js';
export type { FoldersApi } from './resources/folders.js';
export type { ApiKeysApi, OrganizationsApi } from './resources/management.js';
export type { MetadataSchemaApi, ProjectsApi, UploadTokensApi } from './resources/projects.js';
export type { VersionsApi, VersionUploadOptions } from './resources/versions.js';
export type { WebhooksApi } from './resources/webhooks.js';
export {
  localStorageStore,
  type ResumeEntry,
  type ResumeIdentity,
  type ResumeStore,
  resumeKey,
} from './resume.js';
export type { RetryOptions } from './retry.js';
export type { UploadInput } from './source.js';
export type * from './types.js';
export { verifyWebhook } from './verify.js';
