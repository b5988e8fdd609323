import type { Queryable } from '../../infra/db.ts';
import {
  type ApiKey,
  DEFAULT_SETTINGS,
  type Organization,
  type Project,
  type Scope,
  type Settings,
} from './schemas.ts';

export interface ProjectRow {
  id: string;
  organization_id: string;
  name: string;
  bucket: string;
  settings: Settings;
  created_at: Date;
  updated_at: Date;
}

export const toProject = (row: ProjectRow): Project => ({
  ...row,
  // Settings added since the project was stored read as their defaults.
  settings: { ...DEFAULT_SETTINGS, ...row.settings },
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

const PROJECT_COLUMNS = 'id, organization_id, name, bucket, settings, created_at, updated_at';

/** Whether a unique violation is of the bucket (taken by another project). */
export const isBucketTaken = (error: unknown) =>
  (error as { code?: string }).code === '23505' &&
  (error as { constraint?: string }).constraint === 'projects_bucket_key';

export async function insertOrganization(q: Queryable, id: string, name: string): Promise<Organization> {
  const [row] = await q.query<{ id: string; name: string; created_at: Date }>(
    'INSERT INTO organizations (id, name) VALUES ($1, $2) RETURNING id, name, created_at',
    [id, name],
  );
  return { ...row!, created_at: row!.created_at.toISOString() };
}

export async function listOrganizations(q: Queryable): Promise<Organization[]> {
  const rows = await q.query<{ id: string; name: string; created_at: Date }>(
    'SELECT id, name, created_at FROM organizations ORDER BY id DESC',
  );
  return rows.map((row) => ({ ...row, created_at: row.created_at.toISOString() }));
}

export async function organizationExists(q: Queryable, id: string): Promise<boolean> {
  return (await q.query('SELECT 1 FROM organizations WHERE id = $1', [id])).length > 0;
}

export async function insertProject(
  q: Queryable,
  project: { id: string; organizationId: string; name: string; bucket: string; settings: Settings },
): Promise<Project> {
  const [row] = await q.query<ProjectRow>(
    `INSERT INTO projects (id, organization_id, name, bucket, settings) VALUES ($1, $2, $3, $4, $5::jsonb)
     RETURNING ${PROJECT_COLUMNS}`,
    [project.id, project.organizationId, project.name, project.bucket, JSON.stringify(project.settings)],
  );
  return toProject(row!);
}

/** The organization's projects, newest first. */
export async function listProjects(q: Queryable, organizationId: string): Promise<Project[]> {
  const rows = await q.query<ProjectRow>(
    `SELECT ${PROJECT_COLUMNS} FROM projects WHERE organization_id = $1 ORDER BY id DESC`,
    [organizationId],
  );
  return rows.map(toProject);
}

/** The project; `forUpdate` locks it until the transaction ends (not against key references). */
export async function findProject(q: Queryable, id: string, forUpdate = false): Promise<Project | undefined> {
  const [row] = await q.query<ProjectRow>(
    `SELECT ${PROJECT_COLUMNS} FROM projects WHERE id = $1${forUpdate ? ' FOR NO KEY UPDATE' : ''}`,
    [id],
  );
  return row && toProject(row);
}

/** The project whose bucket is `bucket` (the S3 endpoint's name of it). */
export async function findProjectByBucket(q: Queryable, bucket: string): Promise<Project | undefined> {
  const [row] = await q.query<ProjectRow>(`SELECT ${PROJECT_COLUMNS} FROM projects WHERE bucket = $1`, [
    bucket,
  ]);
  return row && toProject(row);
}

export async function bucketExists(q: Queryable, bucket: string): Promise<boolean> {
  return (await q.query('SELECT 1 FROM projects WHERE bucket = $1', [bucket])).length > 0;
}

export async function updateProject(
  q: Queryable,
  id: string,
  changes: { name: string; bucket: string; settings: Settings },
): Promise<Project | undefined> {
  const [row] = await q.query<ProjectRow>(
    `UPDATE projects SET name = $2, bucket = $3, settings = $4::jsonb, updated_at = now() WHERE id = $1
     RETURNING ${PROJECT_COLUMNS}`,
    [id, changes.name, changes.bucket, JSON.stringify(changes.settings)],
  );
  return row && toProject(row);
}

interface ApiKeyRow {
  id: string;
  name: string;
  scopes: Scope[];
  key_prefix: string;
  created_at: Date;
  revoked_at: Date | null;
}

const toApiKey = (row: ApiKeyRow): ApiKey => ({
  ...row,
  created_at: row.created_at.toISOString(),
  revoked_at: row.revoked_at?.toISOString() ?? null,
});

export async function insertApiKey(
  q: Queryable,
  key: { id: string; projectId: string; name: string; scopes: Scope[]; hash: string; prefix: string },
): Promise<ApiKey> {
  const [row] = await q.query<ApiKeyRow>(
    `INSERT INTO api_keys (id, project_id, name, scopes, key_hash, key_prefix) VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING id, name, scopes, key_prefix, created_at, revoked_at`,
    [key.id, key.projectId, key.name, key.scopes, key.hash, key.prefix],
  );
  return toApiKey(row!);
}

export async function listApiKeys(q: Queryable, projectId: string): Promise<ApiKey[]> {
  const rows = await q.query<ApiKeyRow>(
    `SELECT id, name, scopes, key_prefix, created_at, revoked_at FROM api_keys
     WHERE project_id = $1 ORDER BY id DESC`,
    [projectId],
  );
  return rows.map(toApiKey);
}

/** Marks the key revoked and returns its hash (to evict it from the cache), or undefined when unknown. */
export async function revokeApiKey(
  q: Queryable,
  projectId: string,
  keyId: string,
): Promise<string | undefined> {
  const [row] = await q.query<{ key_hash: string }>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE project_id = $1 AND id = $2
     RETURNING key_hash`,
    [projectId, keyId],
  );
  return row?.key_hash;
}

/** The active key with this hash and its project, in one round trip. */
export async function findActiveApiKeyWithProject(
  q: Queryable,
  hash: string,
): Promise<{ key: { id: string; project_id: string; scopes: Scope[] }; project: Project } | undefined> {
  const [row] = await q.query<ProjectRow & { key_id: string; scopes: Scope[] }>(
    `SELECT k.id AS key_id, k.scopes, p.id, p.organization_id, p.name, p.bucket, p.settings, p.created_at,
       p.updated_at
     FROM api_keys k JOIN projects p ON p.id = k.project_id
     WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
    [hash],
  );
  if (!row) return undefined;
  const { key_id, scopes, ...project } = row;
  return { key: { id: key_id, project_id: project.id, scopes }, project: toProject(project) };
}

/** The active key with this id (a principal named by a session token, resolved afresh). */
export async function findActiveApiKey(
  q: Queryable,
  id: string,
): Promise<{ id: string; project_id: string; scopes: Scope[] } | undefined> {
  const [row] = await q.query<{ id: string; project_id: string; scopes: Scope[] }>(
    'SELECT id, project_id, scopes FROM api_keys WHERE id = $1 AND revoked_at IS NULL',
    [id],
  );
  return row;
}
