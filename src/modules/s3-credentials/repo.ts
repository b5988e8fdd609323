import type { Queryable } from '../../infra/db.ts';
import { fileAtKey, joinFileAtKey } from '../files/key-repo.ts';
import type { FileRow } from '../files/repo.ts';
import { type ProjectRow, toProject } from '../projects/repo.ts';
import type { Project } from '../projects/schemas.ts';
import type { S3Credential, S3Scope } from './schemas.ts';

interface CredentialRow {
  id: string;
  name: string;
  access_key_id: string;
  scopes: S3Scope[];
  created_at: Date;
  revoked_at: Date | null;
}

const COLUMNS = 'id, name, access_key_id, scopes, created_at, revoked_at';

const toCredential = (row: CredentialRow): S3Credential => ({
  ...row,
  created_at: row.created_at.toISOString(),
  revoked_at: row.revoked_at?.toISOString() ?? null,
});

export async function insertCredential(
  q: Queryable,
  credential: {
    id: string;
    projectId: string;
    name: string;
    accessKeyId: string;
    secretSealed: string;
    scopes: S3Scope[];
  },
): Promise<S3Credential> {
  const [row] = await q.query<CredentialRow>(
    `INSERT INTO s3_credentials (id, project_id, name, access_key_id, secret_sealed, scopes)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
    [
      credential.id,
      credential.projectId,
      credential.name,
      credential.accessKeyId,
      credential.secretSealed,
      credential.scopes,
    ],
  );
  return toCredential(row!);
}

/** The project's credentials, revoked ones included, newest first; never their secrets. */
export async function listCredentials(q: Queryable, projectId: string): Promise<S3Credential[]> {
  const rows = await q.query<CredentialRow>(
    `SELECT ${COLUMNS} FROM s3_credentials WHERE project_id = $1 ORDER BY id DESC`,
    [projectId],
  );
  return rows.map(toCredential);
}

/** Marks the credential revoked; its access key id (to evict it from the cache), or undefined when unknown. */
export async function revokeCredential(
  q: Queryable,
  projectId: string,
  id: string,
): Promise<string | undefined> {
  const [row] = await q.query<{ access_key_id: string }>(
    `UPDATE s3_credentials SET revoked_at = coalesce(revoked_at, now()) WHERE project_id = $1 AND id = $2
     RETURNING access_key_id`,
    [projectId, id],
  );
  return row?.access_key_id;
}

export interface ActiveCredential {
  id: string;
  projectId: string;
  scopes: S3Scope[];
  /** The sealed secret: only the holder of the server key opens it. */
  secretSealed: string;
}

/**
 * The credential with this access key id, unless revoked, and its project, in one round trip; with
 * `key`, the newest file S3 shows at that key of the project too (`atKey`).
 */
export async function findActiveCredentialWithProject(
  q: Queryable,
  accessKeyId: string,
  key?: string,
): Promise<
  { credential: ActiveCredential; project: Project; atKey?: { file: FileRow | undefined } } | undefined
> {
  const file = key === undefined ? undefined : joinFileAtKey('p.id', '$2');
  const [row] = await q.query<
    ProjectRow & { credential_id: string; scopes: S3Scope[]; secret_sealed: string }
  >(
    `SELECT c.id AS credential_id, c.scopes, c.secret_sealed, p.id, p.organization_id, p.name, p.bucket,
       p.settings, p.created_at, p.updated_at${file ? `, ${file.columns}` : ''}
     FROM s3_credentials c JOIN projects p ON p.id = c.project_id${file ? ` ${file.join}` : ''}
     WHERE c.access_key_id = $1 AND c.revoked_at IS NULL`,
    key === undefined ? [accessKeyId] : [accessKeyId, key],
  );
  if (!row) return undefined;
  const { id, organization_id, name, bucket, settings, created_at, updated_at } = row;
  return {
    credential: { id: row.credential_id, projectId: id, scopes: row.scopes, secretSealed: row.secret_sealed },
    project: toProject({ id, organization_id, name, bucket, settings, created_at, updated_at }),
    ...(file ? { atKey: { file: fileAtKey(row) } } : {}),
  };
}
