import type { Queryable } from '../../infra/db.ts';
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

/** The credential with this access key id, unless revoked. */
export async function findActiveCredential(
  q: Queryable,
  accessKeyId: string,
): Promise<ActiveCredential | undefined> {
  const [row] = await q.query<{ id: string; project_id: string; scopes: S3Scope[]; secret_sealed: string }>(
    `SELECT id, project_id, scopes, secret_sealed FROM s3_credentials
     WHERE access_key_id = $1 AND revoked_at IS NULL`,
    [accessKeyId],
  );
  return (
    row && { id: row.id, projectId: row.project_id, scopes: row.scopes, secretSealed: row.secret_sealed }
  );
}
