import { conflict, notFound, validationError } from '../../domain/errors.ts';
import type { Cache } from '../../infra/cache.ts';
import { evict, readThrough } from '../../infra/cached.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { parseCidr } from '../../lib/ip.ts';
import { parseMimeList } from '../../lib/mime.ts';
import { randomSecret, sha256Hex } from '../../lib/secrets.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { changedFields, recordAudit } from '../audit/service.ts';
import { bucketCandidates, checkBucket, isBucketName } from './bucket.ts';
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
const bucketCacheKey = (bucket: string) => `bucket:${bucket}`;
const apiKeyCacheKey = (hash: string) => `apikey:${hash}`;
const apiKeyIdCacheKey = (id: string) => `apikey-id:${id}`;

/** Suffixed names tried for a project whose derived bucket is taken, before giving up. */
const BUCKET_ATTEMPTS = 8;

const bucketTaken = (bucket: string) =>
  conflict(`The bucket ${bucket} is taken by another project`, { field: 'bucket', value: bucket });

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
  /** The first bucket derived from `name` that no project holds. */
  async function freeBucket(q: Queryable, name: string): Promise<string> {
    let tries = 0;
    for (const candidate of bucketCandidates(name)) {
      if (!(await repo.bucketExists(q, candidate))) return candidate;
      if (++tries === BUCKET_ATTEMPTS) break;
    }
    throw conflict('No free bucket name was found: name one', { field: 'bucket' });
  }

  return {
    createOrganization(name: string, audit: AuditContext): Promise<Organization> {
      checkName(name);
      return db.tx(async (q) => {
        const organization = await repo.insertOrganization(q, newId('org'), name);
        await recordAudit(q, audit, {
          action: 'organization.create',
          organizationId: organization.id,
          targets: { organization_id: organization.id },
          after: { name },
        });
        return organization;
      });
    },

    listOrganizations(): Promise<Organization[]> {
      return repo.listOrganizations(db);
    },

    /**
     * Creates a project. Its bucket is the one asked for (409 when taken), or else derived from its
     * name, with a random suffix when that is taken (a concurrent creation included).
     */
    async createProject(
      organizationId: string,
      input: { name: string; bucket?: string; settings?: SettingsInput },
      audit: AuditContext,
    ): Promise<Project> {
      const { name } = input;
      checkName(name);
      if (input.bucket !== undefined) checkBucket(input.bucket);
      const settings = mergeSettings(DEFAULT_SETTINGS, input.settings);
      for (let attempt = 1; ; attempt++) {
        try {
          return await db.tx(async (q) => {
            if (!(await repo.organizationExists(q, organizationId))) throw notFound('Organization');
            const bucket = input.bucket ?? (await freeBucket(q, name));
            if (input.bucket !== undefined && (await repo.bucketExists(q, bucket))) throw bucketTaken(bucket);
            const project = await repo.insertProject(q, {
              id: newId('proj'),
              organizationId,
              name,
              bucket,
              settings,
            });
            await recordAudit(q, audit, {
              action: 'project.create',
              projectId: project.id,
              targets: { project_id: project.id },
              after: { name: project.name, bucket: project.bucket, settings: project.settings },
            });
            return project;
          });
        } catch (error) {
          // Another project took the bucket between the check and the insert.
          if (!repo.isBucketTaken(error)) throw error;
          if (input.bucket !== undefined) throw bucketTaken(input.bucket);
          if (attempt === BUCKET_ATTEMPTS)
            throw conflict('No free bucket name was found: name one', { field: 'bucket' });
        }
      }
    },

    organizationExists(id: string): Promise<boolean> {
      return repo.organizationExists(db, id);
    },

    async listProjects(organizationId: string): Promise<Project[]> {
      if (!(await repo.organizationExists(db, organizationId))) throw notFound('Organization');
      return repo.listProjects(db, organizationId);
    },

    /** Caches a project read along with something else (a key's lookup), as getProject would. */
    async rememberProject(project: Project): Promise<void> {
      await cache
        .set(projectCacheKey(project.id), JSON.stringify(project), PROJECT_TTL_SECONDS)
        .catch(() => {});
    },

    /** The project, served from the cache when possible (every authenticated request needs it). */
    getProject(id: string): Promise<Project | undefined> {
      return readThrough(cache, projectCacheKey(id), PROJECT_TTL_SECONDS, () => repo.findProject(db, id));
    },

    /**
     * The project whose bucket is `bucket` (the S3 endpoint names projects so), through the same cache
     * as getProject: the bucket's project id is cached, the project itself under its own entry, which
     * a PATCH evicts; a cached id whose project has another bucket by now is read again.
     */
    async getProjectByBucket(bucket: string): Promise<Project | undefined> {
      if (!isBucketName(bucket)) return undefined;
      const id = await readThrough<string>(cache, bucketCacheKey(bucket), PROJECT_TTL_SECONDS, async () => {
        const project = await repo.findProjectByBucket(db, bucket);
        if (!project) return undefined;
        await cache
          .set(projectCacheKey(project.id), JSON.stringify(project), PROJECT_TTL_SECONDS)
          .catch(() => {});
        return project.id;
      });
      if (id === undefined) return undefined;
      const project = await this.getProject(id);
      if (project?.bucket === bucket) return project;
      await evict(cache, bucketCacheKey(bucket));
      return repo.findProjectByBucket(db, bucket);
    },

    async updateProject(
      id: string,
      changes: { name?: string; bucket?: string; settings?: SettingsInput },
      audit: AuditContext,
    ): Promise<Project> {
      if (changes.name !== undefined) checkName(changes.name);
      if (changes.bucket !== undefined) checkBucket(changes.bucket);
      let before: string | undefined;
      let project: Project;
      try {
        project = await db.tx(async (q) => {
          const current = await repo.findProject(q, id, true);
          if (!current) throw notFound('Project');
          before = current.bucket;
          const bucket = changes.bucket ?? current.bucket;
          if (bucket !== current.bucket && (await repo.bucketExists(q, bucket))) throw bucketTaken(bucket);
          const updated = await repo.updateProject(q, id, {
            name: changes.name ?? current.name,
            bucket,
            settings: mergeSettings(current.settings, changes.settings),
          });
          const fields = (p: Project) => ({ name: p.name, bucket: p.bucket, settings: p.settings });
          await recordAudit(q, audit, {
            action: 'project.update',
            projectId: id,
            targets: { project_id: id },
            ...changedFields(fields(current), fields(updated!)),
          });
          return updated!;
        });
      } catch (error) {
        if (repo.isBucketTaken(error)) throw bucketTaken(changes.bucket!);
        throw error;
      }
      await evict(cache, projectCacheKey(id));
      if (before !== undefined && before !== project.bucket) await evict(cache, bucketCacheKey(before));
      return project;
    },

    /** Creates a key; the secret is in the result and nowhere else, only its hash is stored. */
    async createApiKey(
      projectId: string,
      name: string,
      scopes: Scope[],
      audit: AuditContext,
    ): Promise<ApiKey & { key: string }> {
      checkName(name);
      const key = `${API_KEY_PREFIX}${randomSecret()}`;
      const created = await db.tx(async (q) => {
        const inserted = await repo.insertApiKey(q, {
          id: newId('key'),
          projectId,
          name,
          scopes,
          hash: sha256Hex(key),
          prefix: key.slice(0, API_KEY_PREFIX.length + 6),
        });
        await recordAudit(q, audit, {
          action: 'api_key.create',
          projectId,
          targets: { api_key_id: inserted.id },
          after: { name, scopes },
        });
        return inserted;
      });
      return { ...created, key };
    },

    listApiKeys(projectId: string): Promise<ApiKey[]> {
      return repo.listApiKeys(db, projectId);
    },

    async revokeApiKey(projectId: string, keyId: string, audit: AuditContext): Promise<void> {
      const hash = await db.tx(async (q) => {
        const revoked = await repo.revokeApiKey(q, projectId, keyId);
        if (revoked === undefined) throw notFound('API key');
        await recordAudit(q, audit, { action: 'api_key.revoke', projectId, targets: { api_key_id: keyId } });
        return revoked;
      });
      await evict(cache, apiKeyCacheKey(hash));
      await evict(cache, apiKeyIdCacheKey(keyId));
    },

    /** The active key with this id, as a principal (what a temporary S3 credential of the key acts as). */
    getApiKey(keyId: string): Promise<ApiKeyPrincipal | undefined> {
      return readThrough<ApiKeyPrincipal>(cache, apiKeyIdCacheKey(keyId), API_KEY_TTL_SECONDS, async () => {
        const row = await repo.findActiveApiKey(db, keyId);
        return row && { keyId: row.id, projectId: row.project_id, scopes: row.scopes };
      });
    },

    /**
     * The active key with this secret and its project. Where neither is cached (PostgreSQL without
     * Redis reads both for every request) they come in one round trip, and are cached as the two
     * lookups would cache them.
     */
    async resolveApiKeyWithProject(
      secret: string,
    ): Promise<{ key: ApiKeyPrincipal; project: Project | undefined } | undefined> {
      const hash = sha256Hex(secret);
      let joined: Project | undefined;
      const key = await readThrough<ApiKeyPrincipal>(
        cache,
        apiKeyCacheKey(hash),
        API_KEY_TTL_SECONDS,
        async () => {
          const row = await repo.findActiveApiKeyWithProject(db, hash);
          if (!row) return undefined;
          joined = row.project;
          await this.rememberProject(row.project);
          return { keyId: row.key.id, projectId: row.key.project_id, scopes: row.key.scopes };
        },
      );
      if (!key) return undefined;
      return { key, project: joined ?? (await this.getProject(key.projectId)) };
    },
  };
}

export type ProjectService = ReturnType<typeof createProjectService>;
