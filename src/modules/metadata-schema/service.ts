import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { notFound, validationError } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import type { AuditContext } from '../audit/schemas.ts';
import { changedFields, recordAudit } from '../audit/service.ts';
import type { Project } from '../projects/schemas.ts';
import type { MetadataSchema } from './repo.ts';
import * as repo from './repo.ts';

function newAjv(): Ajv2020 {
  return addFormats.default(new Ajv2020({ allErrors: true, strict: false })) as unknown as Ajv2020;
}

export function createMetadataSchemaService(db: Db) {
  // Compiled validators by project, reused while the stored schema is unchanged.
  const compiled = new Map<string, { updatedAt: string; validate: ValidateFunction }>();

  return {
    async get(projectId: string): Promise<MetadataSchema> {
      const found = await repo.findSchema(db, projectId);
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
        const current = await repo.findSchema(q, projectId, true);
        const stored = await repo.upsertSchema(q, projectId, schema, isActive);
        const after = { schema: stored.schema, is_active: stored.is_active };
        await recordAudit(q, audit, {
          action: 'metadata_schema.set',
          projectId,
          targets: { project_id: projectId },
          ...(current
            ? changedFields({ schema: current.schema, is_active: current.is_active }, after)
            : { after }),
        });
        return stored;
      });
    },

    async remove(projectId: string, audit: AuditContext): Promise<void> {
      await db.tx(async (q) => {
        const row = await repo.deleteSchema(q, projectId);
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
      const stored = await repo.findSchema(q, project.id);
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
