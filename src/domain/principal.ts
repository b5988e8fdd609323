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

/** Who is calling, as every way in (REST, and the protocol adapters) authenticates it. */
export type Principal =
  | { kind: 'admin'; scopes: Scope[] }
  | { kind: 'api_key'; keyId: string; projectId: string; scopes: Scope[] }
  | UploadTokenPrincipal;

export const UPLOAD_TOKEN_SCOPES: Scope[] = ['files:upload', 'files:read'];

/** Who is asking, about which project: every file operation is scoped by both. */
export interface Caller {
  principal: Principal;
  project: Project;
}
