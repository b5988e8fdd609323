import type { Queryable } from '../../infra/db.ts';

export interface MetadataSchema {
  schema: Record<string, unknown>;
  is_active: boolean;
  created_at: string;
  updated_at: string;
}

interface SchemaRow {
  schema: Record<string, unknown>;
  is_active: boolean;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'schema, is_active, created_at, updated_at';

const toSchema = (row: SchemaRow): MetadataSchema => ({
  schema: row.schema,
  is_active: row.is_active,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

/** The project's schema; `forUpdate` locks it until the transaction ends. */
export async function findSchema(
  q: Queryable,
  projectId: string,
  forUpdate = false,
): Promise<MetadataSchema | undefined> {
  const [row] = await q.query<SchemaRow>(
    `SELECT ${COLUMNS} FROM metadata_schemas WHERE project_id = $1${forUpdate ? ' FOR UPDATE' : ''}`,
    [projectId],
  );
  return row && toSchema(row);
}

/** Sets the project's schema, replacing the one it had. */
export async function upsertSchema(
  q: Queryable,
  projectId: string,
  schema: Record<string, unknown>,
  isActive: boolean,
): Promise<MetadataSchema> {
  const [row] = await q.query<SchemaRow>(
    `INSERT INTO metadata_schemas (project_id, schema, is_active) VALUES ($1, $2::jsonb, $3)
     ON CONFLICT (project_id) DO UPDATE SET schema = excluded.schema, is_active = excluded.is_active, updated_at = now()
     RETURNING ${COLUMNS}`,
    [projectId, JSON.stringify(schema), isActive],
  );
  return toSchema(row!);
}

/** Deletes the project's schema and returns what it was; undefined when it had none. */
export async function deleteSchema(
  q: Queryable,
  projectId: string,
): Promise<Pick<MetadataSchema, 'schema' | 'is_active'> | undefined> {
  const [row] = await q.query<Pick<SchemaRow, 'schema' | 'is_active'>>(
    'DELETE FROM metadata_schemas WHERE project_id = $1 RETURNING schema, is_active',
    [projectId],
  );
  return row;
}
