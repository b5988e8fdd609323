import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  insufficientScope,
  notFound,
  permissionDenied,
  tokenExpired,
  unauthenticated,
} from '../domain/errors.ts';
import type { Principal, UploadTokenPrincipal } from '../domain/principal.ts';
import { ipInCidrs } from '../lib/ip.ts';
import { safeEqual, sha256Hex } from '../lib/secrets.ts';
import type { Project, Scope } from '../modules/projects/schemas.ts';
import type { ProjectService } from '../modules/projects/service.ts';

/**
 * What an endpoint requires: a scope, the admin key, any valid credential ('authenticated': checked
 * against its own project's IP allowlist), or nothing at all.
 */
export type Access = Scope | 'admin' | 'authenticated' | 'public';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
    /** Whether upload tokens may call the endpoint (within their two scopes); API keys are unaffected. */
    uploadToken?: boolean;
    /** What the OpenAPI document says the route requires, where `access` alone would say too much. */
    requirement?: string;
    /**
     * A protocol's own check of a request (tus's version), run before its credential and its rate
     * limits: what the endpoint cannot take at all is refused as the protocol says, whoever sends it.
     */
    precondition?: (request: FastifyRequest) => void;
  }
  interface FastifyRequest {
    principal: Principal;
    /** The project named by the route's project_id, after the caller was checked against it. */
    project: Project;
  }
}

export interface Credentials {
  adminKeyHash: string;
  projects: ProjectService;
  /** Resolves an upload token; 'expired' for a known token past its expires_at. */
  resolveUploadToken(secret: string): Promise<UploadTokenPrincipal | 'expired' | undefined>;
}

// The scheme name is case-insensitive (RFC 9110 §11.1).
const BEARER = /^bearer +([A-Za-z0-9_-]{1,512})$/i;

/** Who is calling; for an API key also its project, read with it (protocol edges use it on public routes). */
export async function authenticate(
  request: FastifyRequest,
  credentials: Credentials,
): Promise<{ principal: Principal; project?: Project }> {
  const match = BEARER.exec(request.headers.authorization ?? '');
  if (!match) throw unauthenticated('Send Authorization: Bearer <API key or upload token>');
  const secret = match[1]!;
  if (secret.startsWith('coffer_admin_')) {
    if (safeEqual(sha256Hex(secret), credentials.adminKeyHash)) {
      return { principal: { kind: 'admin', scopes: [] } };
    }
  } else if (secret.startsWith('coffer_live_')) {
    // The key's project comes along with it: it is the project of the request unless that is 404.
    const found = await credentials.projects.resolveApiKeyWithProject(secret);
    if (found) return { principal: { kind: 'api_key', ...found.key }, project: found.project };
  } else if (secret.startsWith('coffer_upload_token_')) {
    const token = await credentials.resolveUploadToken(secret);
    if (token === 'expired') throw tokenExpired();
    if (token) return { principal: token };
  }
  throw unauthenticated('The API key or upload token is unknown or revoked');
}

/**
 * Checks every /v1 request in the order: who is calling (401), whether the project is theirs
 * (404, never 403, so ids of other tenants are not confirmed), the IP allowlist (403), the scope (403).
 */
export function installAuth(app: FastifyInstance, credentials: Credentials): void {
  app.decorateRequest('principal', null as never);
  app.decorateRequest('project', null as never);
  app.addHook('onRequest', async (request) => {
    const access = request.routeOptions.config.access;
    if (access === undefined || access === 'public') return;
    const { principal, project: keyProject } = await authenticate(request, credentials);
    request.principal = principal;
    const named = (request.params as { project_id?: string }).project_id;
    const own = access === 'authenticated' && principal.kind !== 'admin' ? principal.projectId : undefined;
    const projectId = named ?? own;
    if (projectId !== undefined) {
      if (principal.kind !== 'admin' && principal.projectId !== projectId) throw notFound('Project');
      const project =
        keyProject?.id === projectId ? keyProject : await credentials.projects.getProject(projectId);
      if (!project) throw notFound('Project');
      request.project = project;
      const allowlist = project.settings.ip_allowlist;
      if (principal.kind !== 'admin' && allowlist !== null && !ipInCidrs(request.ip, allowlist)) {
        throw permissionDenied();
      }
    }
    // Admin-only routes land here too (no scope is 'admin'): after the project check, so that a key
    // of another project learns nothing about the id it named.
    const tokenRefused = principal.kind === 'upload_token' && !request.routeOptions.config.uploadToken;
    const scopeMissing = access !== 'authenticated' && !principal.scopes.includes(access as Scope);
    if (principal.kind !== 'admin' && (tokenRefused || scopeMissing)) {
      throw insufficientScope(access);
    }
  });
}
