/** Friendly names for the generated OpenAPI types (src/schema.d.ts). */
import type { QueryOf } from './openapi.js';
import type { components } from './schema.js';

export type { components, operations, paths } from './schema.js';

type Schemas = components['schemas'];

/** The error body of every failed request. */
export type ErrorBody = Schemas['Error'];

export type FileObject = Schemas['File'];
export type FileStatus = FileObject['status'];
export type FileCategory = FileObject['category'];
/** One page of files. */
export type FileList = Schemas['FileList'];
/** Filters and paging of a file listing; `metadata` may be given as an object (sent as its JSON). */
export type ListFilesQuery = Partial<Omit<QueryOf<'/v1/projects/{project_id}/files', 'get'>, 'metadata'>> & {
  metadata?: string | Record<string, unknown>;
};
/** A presigned download URL and its expiry. */
export type DownloadUrl = Schemas['PresignedUrl'];

export type InitiateUploadRequest = Schemas['InitiateUploadRequest'];
export type InitiatedUpload = Schemas['InitiatedUpload'];
export type MultipartStartRequest = Schemas['StartMultipartUploadRequest'];
export type MultipartSession = Schemas['StartedMultipartUpload'];
/** A multipart upload as stored so far (its parts), to resume it. */
export type MultipartState = Schemas['MultipartUpload'];
export type StoredPart = Schemas['UploadedPart'];
export type PartUrl = Schemas['PartUrl'];

export type Folder = Schemas['Folder'];
export type FolderList = Schemas['FolderList'];
export type CreateFolderRequest = Schemas['CreateFolderRequest'];
export type UpdateFolderRequest = Schemas['UpdateFolderRequest'];

export type FileVersion = Schemas['FileVersion'];
export type FileVersionList = Schemas['FileVersionList'];
/** The answer of a version confirm: the new content is `committed`, or `processing` while it is scanned. */
export type VersionConfirmation = Schemas['ConfirmedVersionUpload'];

export type Webhook = Schemas['Webhook'];
/** A webhook as created: with its `signing_secret`, shown only once. */
export type CreatedWebhook = Schemas['CreatedWebhook'];
export type WebhookList = Schemas['WebhookList'];
export type WebhookEvent = Webhook['events'][number];
export type CreateWebhookRequest = Schemas['CreateWebhookRequest'];
export type UpdateWebhookRequest = Schemas['UpdateWebhookRequest'];
export type Delivery = Schemas['Delivery'];
export type DeliveryList = Schemas['DeliveryList'];
export type DeliveryStatus = Delivery['status'];

export type UploadTokenRequest = Schemas['CreateUploadTokenRequest'];
export type UploadToken = Schemas['UploadToken'];

export type Project = Schemas['Project'];
export type ProjectList = Schemas['ProjectList'];
export type ProjectSettings = Schemas['ProjectSettings'];
export type CreateProjectRequest = Schemas['CreateProjectRequest'];
export type UpdateProjectRequest = Schemas['UpdateProjectRequest'];

export type Organization = Schemas['Organization'];
export type OrganizationList = Schemas['OrganizationList'];
export type CreateOrganizationRequest = Schemas['CreateOrganizationRequest'];

export type ApiKey = Schemas['ApiKey'];
export type ApiKeyList = Schemas['ApiKeyList'];
/** An API key as created: with its `key`, shown only once. */
export type CreatedApiKey = Schemas['CreatedApiKey'];
export type CreateApiKeyRequest = Schemas['CreateApiKeyRequest'];
export type Scope = CreateApiKeyRequest['scopes'][number];
/** What a credential is: `GET /v1/whoami`. */
export type Identity = Schemas['Identity'];
export type CredentialKind = Identity['kind'];

export type MetadataSchema = Schemas['MetadataSchema'];
export type PutMetadataSchemaRequest = Schemas['SetMetadataSchemaRequest'];
