import { notFound, validationError } from '../../http/errors.ts';
import type { Cache } from '../../infra/cache.ts';
import { evict, readThrough } from '../../infra/cached.ts';
import type { Db } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { parseCidr } from '../../lib/ip.ts';
import { parseMimeList } from '../../lib/mime.ts';
import { randomSecret, sha256Hex } from '../../lib/secrets.ts';
import * as repo from './repo.ts';
import {
  type ApiKey,
  DEFAULT_SETTINGS,
  type Organization,
  type Project,
  type Scope,
  type Settings,
  type SettingsInput,
} from './schemas.ts';

const PROJECT_TTL_SECONDS = 30;
const API_KEY_TTL_SECONDS = 60;
export const API_KEY_PREFIX = 'coffer_live_';

const projectCacheKey = (id: string) => `project:${id}`;
const apiKeyCacheKey = (hash: string) => `apikey:${hash}`;

export interface ApiKeyPrincipal {
  keyId: string;
  projectId: string;
  scopes: Scope[];
}

/** A name a person will recognise in a list: not only whitespace. */
function checkName(name: string): string {
  if (name.trim() === '') throw validationError('name must not be blank', { field: 'name' });
  return name;
}

/** Applies `input` over `base`, normalising values and rejecting what breaks a rule (422). */
export function mergeSettings(base: Settings, input: SettingsInput = {}): Settings {
  const merged = { ...base, ...input } as Settings;
  if (merged.allowed_mime_types !== null) {
    const parsed = parseMimeList(merged.allowed_mime_types);
    if ('invalid' in parsed) {
      throw validationError(
        `settings.allowed_mime_types has a malformed entry: ${JSON.stringify(parsed.invalid)}`,
        {
          field: 'settings.allowed_mime_types',
          value: parsed.invalid,
        },
      );
    }
    merged.allowed_mime_types = parsed.entries.join(',');
  }
  if (merged.ip_allowlist !== null) {
    const invalid = merged.ip_allowlist.find((entry) => parseCidr(entry.trim()) === undefined);
    if (invalid !== undefined) {
      throw validationError(`settings.ip_allowlist has a malformed CIDR: ${JSON.stringify(invalid)}`, {
        field: 'settings.ip_allowlist',
        value: invalid,
      });
    }
    merged.ip_allowlist = merged.ip_allowlist.map((entry) => entry.trim());
  }
  return merged;
}

export function createProjectService(db: Db, cache: Cache) {
  return {
    createOrganization(name: string): Promise<Organization> {
      return repo.insertOrganization(db, newId('org'), checkName(name));
    },

    listOrganizations(): Promise<Organization[]> {
      return repo.listOrganizations(db);
    },

    async createProject(organizationId: string, name: string, settings?: SettingsInput): Promise<Project> {
      checkName(name);
      if (!(await repo.organizationExists(db, organizationId))) throw notFound('Organization');
      return repo.insertProject(db, {
        id: newId('proj'),
        organizationId,
        name,
        settings: mergeSettings(DEFAULT_SETTINGS, settings),
      });
    },

    /** The project, served from the cache when possible (every authenticated request needs it). */
    getProject(id: string): Promise<Project | undefined> {
      return readThrough(cache, projectCacheKey(id), PROJECT_TTL_SECONDS, () => repo.findProject(db, id));
    },

    async updateProject(id: string, changes: { name?: string; settings?: SettingsInput }): Promise<Project> {
      if (changes.name !== undefined) checkName(changes.name);
      const project = await db.tx(async (q) => {
        const current = await repo.findProject(q, id);
        if (!current) throw notFound('Project');
        return repo.updateProject(q, id, {
          name: changes.name ?? current.name,
          settings: mergeSettings(current.settings, changes.settings),
        });
      });
      await evict(cache, projectCacheKey(id));
      return project!;
    },

    /** Creates a key; the secret is in the result and nowhere else, only its hash is stored. */
    async createApiKey(projectId: string, name: string, scopes: Scope[]): Promise<ApiKey & { key: string }> {
      checkName(name);
      const key = `${API_KEY_PREFIX}${randomSecret()}`;
      const created = await repo.insertApiKey(db, {
        id: newId('key'),
        projectId,
        name,
        scopes,
        hash: sha256Hex(key),
        prefix: key.slice(0, API_KEY_PREFIX.length + 6),
      });
      return { ...created, key };
    },

    listApiKeys(projectId: string): Promise<ApiKey[]> {
      return repo.listApiKeys(db, projectId);
    },

    async revokeApiKey(projectId: string, keyId: string): Promise<void> {
      const hash = await repo.revokeApiKey(db, projectId, keyId);
      if (hash === undefined) throw notFound('API key');
      await evict(cache, apiKeyCacheKey(hash));
    },

    /** The active key with this secret, looked up by its hash. */
    resolveApiKey(secret: string): Promise<ApiKeyPrincipal | undefined> {
      const hash = sha256Hex(secret);
      return readThrough(cache, apiKeyCacheKey(hash), API_KEY_TTL_SECONDS, async () => {
        const row = await repo.findActiveApiKeyByHash(db, hash);
        return row && { keyId: row.id, projectId: row.project_id, scopes: row.scopes };
      });
    },
  };
}

export type ProjectService = ReturnType<typeof createProjectService>;
