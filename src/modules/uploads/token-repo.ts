import type { Queryable } from '../../infra/db.ts';

export interface UploadTokenRow {
  id: string;
  project_id: string;
  max_size: number;
  allowed_mime_types: string[];
  max_files: number;
  files_used: number;
  folder_id: string | null;
  metadata: Record<string, unknown> | null;
  tags: string[] | null;
  owner_user_id: string | null;
  owner_org_id: string | null;
  expires_at: Date;
}

const COLUMNS = `id, project_id, max_size, allowed_mime_types, max_files, files_used, folder_id, metadata, tags,
  owner_user_id, owner_org_id, expires_at`;

export async function insertToken(
  q: Queryable,
  token: Omit<UploadTokenRow, 'files_used'> & { hash: string },
) {
  await q.query(
    `INSERT INTO upload_tokens (id, project_id, token_hash, max_size, allowed_mime_types, max_files, folder_id,
       metadata, tags, owner_user_id, owner_org_id, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12)`,
    [
      token.id,
      token.project_id,
      token.hash,
      token.max_size,
      token.allowed_mime_types,
      token.max_files,
      token.folder_id,
      token.metadata === null ? null : JSON.stringify(token.metadata),
      token.tags,
      token.owner_user_id,
      token.owner_org_id,
      token.expires_at,
    ],
  );
}

export async function findTokenByHash(q: Queryable, hash: string): Promise<UploadTokenRow | undefined> {
  const [row] = await q.query<UploadTokenRow>(`SELECT ${COLUMNS} FROM upload_tokens WHERE token_hash = $1`, [
    hash,
  ]);
  return row;
}

export async function findToken(q: Queryable, id: string): Promise<UploadTokenRow | undefined> {
  const [row] = await q.query<UploadTokenRow>(`SELECT ${COLUMNS} FROM upload_tokens WHERE id = $1`, [id]);
  return row;
}

/** Counts one more file against the token; false when `max_files` is already reached. */
export async function consumeToken(q: Queryable, id: string): Promise<boolean> {
  const rows = await q.query(
    'UPDATE upload_tokens SET files_used = files_used + 1 WHERE id = $1 AND files_used < max_files RETURNING id',
    [id],
  );
  return rows.length > 0;
}
