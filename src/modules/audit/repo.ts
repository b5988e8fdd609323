import type { Queryable } from '../../infra/db.ts';
import type { ActorType, AuditAction, AuditEntry } from './schemas.ts';

interface AuditRow {
  id: string;
  created_at: Date;
  organization_id: string;
  project_id: string | null;
  action: AuditAction;
  actor_type: ActorType;
  actor_id: string | null;
  client_ip: string | null;
  request_id: string | null;
  targets: Record<string, string>;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

const COLUMNS =
  'id, created_at, organization_id, project_id, action, actor_type, actor_id, client_ip, request_id, targets, before, after';

export const toAuditEntry = (row: AuditRow): AuditEntry => ({
  ...row,
  created_at: row.created_at.toISOString(),
});

export interface NewAuditRow extends Omit<AuditRow, 'organization_id'> {
  /** null: the organization of `project_id`. */
  organization_id: string | null;
}

export async function insertEntry(q: Queryable, row: NewAuditRow): Promise<void> {
  await q.query(
    `INSERT INTO audit_log (${COLUMNS})
     VALUES ($1, $2, coalesce($3, (SELECT organization_id FROM projects WHERE id = $4)), $4, $5, $6, $7, $8, $9,
       $10::jsonb, $11::jsonb, $12::jsonb)`,
    [
      row.id,
      row.created_at,
      row.organization_id,
      row.project_id,
      row.action,
      row.actor_type,
      row.actor_id,
      row.client_ip,
      row.request_id,
      JSON.stringify(row.targets),
      row.before === null ? null : JSON.stringify(row.before),
      row.after === null ? null : JSON.stringify(row.after),
    ],
  );
}

export interface AuditFilters {
  /** The project's entries, or every entry of the organization (its projects' included). */
  scope: { projectId: string } | { organizationId: string };
  action?: AuditAction;
  actorType?: ActorType;
  actorId?: string;
  /** Id bounds, inclusive: a time range (ids sort by time). */
  fromId?: string;
  toId?: string;
  /** Only entries older than this one (keyset pagination). */
  cursor?: string;
  limit: number;
}

/** Newest first. */
export async function listEntries(q: Queryable, filters: AuditFilters): Promise<AuditRow[]> {
  const params: unknown[] = [];
  const where: string[] = [];
  const add = (sql: (p: string) => string, value: unknown) => {
    if (value === undefined) return;
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if ('projectId' in filters.scope) add((p) => `project_id = ${p}`, filters.scope.projectId);
  else add((p) => `organization_id = ${p}`, filters.scope.organizationId);
  add((p) => `action = ${p}`, filters.action);
  add((p) => `actor_type = ${p}`, filters.actorType);
  add((p) => `actor_id = ${p}`, filters.actorId);
  add((p) => `id >= ${p}`, filters.fromId);
  add((p) => `id <= ${p}`, filters.toId);
  add((p) => `id < ${p}`, filters.cursor);
  params.push(filters.limit);
  return q.query<AuditRow>(
    `SELECT ${COLUMNS} FROM audit_log WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT $${params.length}`,
    params,
  );
}

/** Deletes up to `limit` of the oldest entries with an id below `bound`; returns how many. */
export async function deleteBefore(q: Queryable, bound: string, limit: number): Promise<number> {
  const [row] = await q.query<{ deleted: number }>(
    `WITH gone AS (
       DELETE FROM audit_log WHERE id IN (
         SELECT id FROM audit_log WHERE id < $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING 1)
     SELECT count(*)::int8 AS deleted FROM gone`,
    [bound, limit],
  );
  return row!.deleted;
}
