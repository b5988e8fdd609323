import { validationError } from '../../domain/errors.ts';
import { UPLOAD_TOKEN_SCOPES, type UploadTokenPrincipal } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { isMimePattern, mimeCovers, parseMimeList } from '../../lib/mime.ts';
import { randomSecret, sha256Hex } from '../../lib/secrets.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { recordAudit } from '../audit/service.ts';
import { checkMetadataSize, normalizeTags } from '../files/rules.ts';
import type { FolderService } from '../folders/service.ts';
import type { Project } from '../projects/schemas.ts';
import { findToken, findTokenByHash, insertToken, type UploadTokenRow } from './token-repo.ts';

export const UPLOAD_TOKEN_PREFIX = 'coffer_upload_token_';
export const TOKEN_DEFAULTS = { max_size: 104_857_600, max_files: 10, expires_in: 3600 } as const;

export interface TokenRequest {
  max_size?: number;
  allowed_mime_types?: string[];
  max_files?: number;
  folder_id?: string | null;
  folder_path?: string | null;
  metadata?: Record<string, unknown> | null;
  tags?: string[] | null;
  expires_in?: number;
  owner_user_id?: string | null;
  owner_org_id?: string | null;
}

/** The principal of a token's row, 'expired' past its expires_at. */
function principalOf(row: UploadTokenRow): UploadTokenPrincipal | 'expired' {
  if (row.expires_at.getTime() <= Date.now()) return 'expired';
  return {
    kind: 'upload_token',
    tokenId: row.id,
    projectId: row.project_id,
    scopes: UPLOAD_TOKEN_SCOPES,
    ownerUserId: row.owner_user_id,
    ownerOrgId: row.owner_org_id,
  };
}

export function createUploadTokenService(deps: { db: Db; folders: FolderService }) {
  const { db, folders } = deps;

  /** The token's MIME list: the caller's (each entry covered by the project's list), else the project's, else any. */
  function mimeTypes(project: Project, requested: string[] | undefined): string[] {
    const projectList = project.settings.allowed_mime_types;
    const allowed =
      projectList === null ? undefined : (parseMimeList(projectList) as { entries: string[] }).entries;
    if (requested === undefined) return allowed ?? ['*/*'];
    if (requested.length === 0) {
      throw validationError('allowed_mime_types must list at least one type', {
        field: 'allowed_mime_types',
      });
    }
    const entries = [...new Set(requested.map((entry) => entry.trim().toLowerCase()))];
    for (const entry of entries) {
      if (!isMimePattern(entry)) {
        throw validationError(`allowed_mime_types has a malformed entry: ${JSON.stringify(entry)}`, {
          field: 'allowed_mime_types',
          value: entry,
        });
      }
      if (allowed && !allowed.some((outer) => mimeCovers(outer, entry))) {
        throw validationError(`allowed_mime_types entry ${entry} is wider than the project allows`, {
          field: 'allowed_mime_types',
          value: entry,
          project_allowed_mime_types: allowed,
        });
      }
    }
    return entries;
  }

  function maxSize(project: Project, requested: number | undefined): number {
    const ceiling = project.settings.max_file_size_bytes;
    if (requested === undefined)
      return Math.min(TOKEN_DEFAULTS.max_size, ceiling ?? Number.POSITIVE_INFINITY);
    if (ceiling !== null && requested > ceiling) {
      throw validationError(`max_size ${requested} exceeds the project's max_file_size_bytes ${ceiling}`, {
        field: 'max_size',
        max_file_size_bytes: ceiling,
      });
    }
    return requested;
  }

  return {
    /**
     * Issues a token whose constraints never exceed the project's. The token itself is in the
     * result only; what is stored is its hash.
     */
    async create(project: Project, request: TokenRequest, audit: AuditContext) {
      const constraints = {
        max_size: maxSize(project, request.max_size),
        allowed_mime_types: mimeTypes(project, request.allowed_mime_types),
        max_files: request.max_files ?? TOKEN_DEFAULTS.max_files,
      };
      const metadata = request.metadata ?? null;
      if (metadata) checkMetadataSize(metadata);
      const tags = request.tags ? normalizeTags(request.tags) : null;
      let folderId: string | null = null;
      if (request.folder_path != null) {
        folderId = (await folders.ensurePath(project.id, request.folder_path)).id;
      } else if (request.folder_id != null) {
        if (!(await folders.exists(db, project.id, request.folder_id))) {
          throw validationError('folder_id is not a folder of this project', { field: 'folder_id' });
        }
        folderId = request.folder_id;
      }
      const token = `${UPLOAD_TOKEN_PREFIX}${randomSecret()}`;
      const expiresAt = new Date(Date.now() + (request.expires_in ?? TOKEN_DEFAULTS.expires_in) * 1000);
      const id = newId('tok');
      const owners = {
        owner_user_id: request.owner_user_id ?? null,
        owner_org_id: request.owner_org_id ?? null,
      };
      await db.tx(async (q) => {
        await insertToken(q, {
          id,
          project_id: project.id,
          hash: sha256Hex(token),
          ...constraints,
          folder_id: folderId,
          metadata,
          tags,
          ...owners,
          expires_at: expiresAt,
        });
        // What the token may do, for whom, until when: never the token itself.
        await recordAudit(q, audit, {
          action: 'upload_token.create',
          projectId: project.id,
          targets: { upload_token_id: id },
          after: { ...constraints, folder_id: folderId, ...owners, expires_at: expiresAt.toISOString() },
        });
      });
      return { token, expires_at: expiresAt.toISOString(), constraints, folder_id: folderId };
    },

    /** The principal of a token, 'expired' past its expires_at, undefined when unknown. */
    async resolve(secret: string): Promise<UploadTokenPrincipal | 'expired' | undefined> {
      const row = await findTokenByHash(db, sha256Hex(secret));
      return row && principalOf(row);
    },

    /** The same by the token's id (a credential issued to the token names it so). */
    async resolveById(id: string): Promise<UploadTokenPrincipal | 'expired' | undefined> {
      const row = await findToken(db, id);
      return row && principalOf(row);
    },

    /** Until when the token is valid, and the folder it uploads into (null: where the upload says). */
    async describe(id: string): Promise<{ expiresAt: Date; folderId: string | null } | undefined> {
      const row = await findToken(db, id);
      return row && { expiresAt: row.expires_at, folderId: row.folder_id };
    },
  };
}

export type UploadTokenService = ReturnType<typeof createUploadTokenService>;
