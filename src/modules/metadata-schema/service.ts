import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { notFound, validationError } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { changedFields, recordAudit } from '../audit/service.ts';
import type { Project } from '../projects/schemas.ts';

export interface MetadataSchema {
  schema: Record<string, unknown>;
  is_active: boolean;
  created_at: string;
  updated_at: string;
}

interface Row {
  schema: Record<string, unknown>;
  is_active: boolean;
  created_at: Date;
  updated_at: Date;
}

const toSchema = (row: Row): MetadataSchema => ({
  schema: row.schema,
  is_active: row.is_active,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

function newAjv(): Ajv2020 {
  return addFormats.default(new Ajv2020({ allErrors: true, strict: false })) as unknown as Ajv2020;
}

export function createMetadataSchemaService(db: Db) {
  // Compiled validators by project, reused while the stored schema is unchanged.
  const compiled = new Map<string, { updatedAt: string; validate: ValidateFunction }>();

  async function find(
    q: Queryable,
    projectId: string,
    forUpdate = false,
  ): Promise<MetadataSchema | undefined> {
    const [row] = await q.query<Row>(
      `SELECT schema, is_active, created_at, updated_at FROM metadata_schemas WHERE project_id = $1${forUpdate ? ' FOR UPDATE' : ''}`,
      [projectId],
    );
    return row && toSchema(row);
  }

  return {
    async get(projectId: string): Promise<MetadataSchema> {
      const found = await find(db, projectId);
      if (!found) throw notFound('Metadata schema');
      return found;
    },

    async put(
      projectId: string,
      schema: Record<string, unknown>,
      isActive: boolean,
      audit: AuditContext,
    ): Promise<MetadataSchema> {
      try {
        newAjv().compile(schema);
      } catch (error) {
        throw validationError('schema is not a valid JSON Schema 2020-12', {
          field: 'schema',
          reason: (error as Error).message,
        });
      }
      return db.tx(async (q) => {
        const current = await find(q, projectId, true);
        const [row] = await q.query<Row>(
          `INSERT INTO metadata_schemas (project_id, schema, is_active) VALUES ($1, $2::jsonb, $3)
           ON CONFLICT (project_id) DO UPDATE SET schema = excluded.schema, is_active = excluded.is_active, updated_at = now()
           RETURNING schema, is_active, created_at, updated_at`,
          [projectId, JSON.stringify(schema), isActive],
        );
        const after = { schema: row!.schema, is_active: row!.is_active };
        await recordAudit(q, audit, {
          action: 'metadata_schema.set',
          projectId,
          targets: { project_id: projectId },
          ...(current
            ? changedFields({ schema: current.schema, is_active: current.is_active }, after)
            : { after }),
        });
        return toSchema(row!);
      });
    },

    async remove(projectId: string, audit: AuditContext): Promise<void> {
      await db.tx(async (q) => {
        const [row] = await q.query<Pick<Row, 'schema' | 'is_active'>>(
          'DELETE FROM metadata_schemas WHERE project_id = $1 RETURNING schema, is_active',
          [projectId],
        );
        if (!row) throw notFound('Metadata schema');
        await recordAudit(q, audit, {
          action: 'metadata_schema.delete',
          projectId,
          targets: { project_id: projectId },
          before: { schema: row.schema, is_active: row.is_active },
        });
      });
    },

    /**
     * Validates the metadata a file would have after a write, when the project enforces an active
     * schema; a mismatch is 422 with the validator's errors.
     */
    async check(q: Queryable, project: Project, metadata: Record<string, unknown>): Promise<void> {
      if (!project.settings.enforce_schema) return;
      const stored = await find(q, project.id);
      if (!stored?.is_active) return;
      let entry = compiled.get(project.id);
      if (entry?.updatedAt !== stored.updated_at) {
        entry = { updatedAt: stored.updated_at, validate: newAjv().compile(stored.schema) };
        compiled.set(project.id, entry);
      }
      if (!entry.validate(metadata)) {
        throw validationError('metadata does not match the project metadata schema', {
          field: 'metadata',
          errors: (entry.validate.errors ?? []).map((e) => ({
            path: e.instancePath || '/',
            keyword: e.keyword,
            message: e.message,
            params: e.params,
          })),
        });
      }
    },
  };
}

export type MetadataSchemaService = ReturnType<typeof createMetadataSchemaService>;
