import type { Project, Scope } from '../modules/projects/schemas.ts';

export interface UploadTokenPrincipal {
  kind: 'upload_token';
  tokenId: string;
  projectId: string;
  scopes: Scope[];
  /** Whom the token uploads for: a token of the same owner may continue its multipart uploads. */
  ownerUserId: string | null;
  ownerOrgId: string | null;
}

/** A long-lived S3 credential of a project (the S3 endpoint's own kind of key). */
export interface S3CredentialPrincipal {
  kind: 's3_credential';
  credentialId: string;
  projectId: string;
  /** A subset of files:read, files:upload and files:delete. */
  scopes: Scope[];
}

/**
 * Who is calling, as every way in (REST, and the protocol adapters) authenticates it. A temporary S3
 * credential is not a kind of its own: it acts as the upload token or API key it was issued to.
 */
export type Principal =
  | { kind: 'admin'; scopes: Scope[] }
  | { kind: 'api_key'; keyId: string; projectId: string; scopes: Scope[] }
  | UploadTokenPrincipal
  | S3CredentialPrincipal;

export const UPLOAD_TOKEN_SCOPES: Scope[] = ['files:upload', 'files:read'];

/** Who is asking, about which project: every file operation is scoped by both. */
export interface Caller {
  principal: Principal;
  project: Project;
}
