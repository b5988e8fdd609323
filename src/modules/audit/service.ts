import type { Logger } from 'pino';
import { parseDate } from '../../domain/dates.ts';
import { badRequest } from '../../domain/errors.ts';
import type { Principal } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { idBound, isId, newId, timeOfId } from '../../lib/ids.ts';
import * as repo from './repo.ts';
import type { AuditAction, AuditContext, AuditEntry, AuditLogQuery } from './schemas.ts';

/** The id of the credential that acted; none for the admin key. */
function actorIdOf(principal: Principal): string | null {
  switch (principal.kind) {
    case 'admin':
      return null;
    case 'api_key':
      return principal.keyId;
    case 'upload_token':
      return principal.tokenId;
    case 's3_credential':
      return principal.credentialId;
  }
}

/** The audit context of an API request: its caller, client IP (as COFFER_TRUST_PROXY reads it) and request id. */
export function auditContext(request: { principal: Principal; ip: string; id: string }): AuditContext {
  const { principal } = request;
  return {
    actorType: principal.kind,
    actorId: actorIdOf(principal),
    ip: request.ip,
    requestId: request.id,
  };
}

/** Changes made by `coffer admin` commands, at the server's own console. */
export const CLI_AUDIT: AuditContext = { actorType: 'cli', actorId: null, ip: null, requestId: null };

type Fields = Record<string, unknown>;

const isObject = (value: unknown): value is Fields =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function sameValue(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((item, i) => sameValue(item, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].every((key) => sameValue(a[key], b[key]));
  }
  return a === b;
}

/**
 * The fields that differ between two states of an object, each side holding its own values; nested
 * objects (settings, a JSON Schema) are compared field by field, so only what changed is kept.
 */
export function changedFields(before: Fields, after: Fields): { before: Fields; after: Fields } {
  const result = { before: {} as Fields, after: {} as Fields };
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const [old, now] = [before[key], after[key]];
    if (sameValue(old, now)) continue;
    if (isObject(old) && isObject(now)) {
      const nested = changedFields(old, now);
      result.before[key] = nested.before;
      result.after[key] = nested.after;
    } else {
      if (old !== undefined) result.before[key] = old;
      if (now !== undefined) result.after[key] = now;
    }
  }
  return result;
}

// Coffer's credentials (API keys, the admin key, upload tokens, webhook signing secrets): the services
// record none of them, and one typed by mistake into a recorded field (a name, a reason) is masked too.
const SECRET = /(?:coffer_(?:live|admin|upload_token)_|whsec_)[A-Za-z0-9_-]+/g;

function masked(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(SECRET, '[secret]');
  if (Array.isArray(value)) return value.map(masked);
  if (isObject(value))
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [masked(k), masked(v)]));
  return value;
}

export interface AuditRecord {
  action: AuditAction;
  /** The project acted on; absent for an action on the organization itself. */
  projectId?: string;
  /** Needed only without `projectId`: otherwise the project's organization. */
  organizationId?: string;
  targets: Record<string, string>;
  before?: Fields | null;
  after?: Fields | null;
}

/**
 * Records an action in the audit log. Call it with the transaction that makes the change, so the
 * change and its entry are committed (or rolled back) together.
 */
export async function recordAudit(q: Queryable, audit: AuditContext, record: AuditRecord): Promise<void> {
  const id = newId('aud');
  await repo.insertEntry(q, {
    id,
    // The id's own time: a time range is then a range of ids.
    created_at: timeOfId(id),
    organization_id: record.organizationId ?? null,
    project_id: record.projectId ?? null,
    action: record.action,
    actor_type: audit.actorType,
    actor_id: audit.actorId,
    client_ip: audit.ip,
    request_id: audit.requestId,
    targets: record.targets,
    before: (masked(record.before) as Fields | undefined) ?? null,
    after: (masked(record.after) as Fields | undefined) ?? null,
  });
}

const DAY_MS = 86_400_000;
/** Entries deleted per statement: a long backlog is pruned in short transactions. */
const PRUNE_BATCH = 1000;

export function createAuditService(deps: { db: Db; retentionDays: number; logger: Logger }) {
  const { db, retentionDays, logger } = deps;
  return {
    /** A page of the entries of a project, or of an organization and its projects; newest first. */
    async list(
      scope: repo.AuditFilters['scope'],
      query: AuditLogQuery,
    ): Promise<{ items: AuditEntry[]; limit: number; has_more: boolean; next_cursor: string | null }> {
      if (query.cursor !== undefined && !isId('aud', query.cursor)) {
        throw badRequest('cursor must be a next_cursor value from a previous page', { field: 'cursor' });
      }
      const from = parseDate('from', query.from);
      const to = parseDate('to', query.to, true);
      const rows = await repo.listEntries(db, {
        scope,
        action: query.action,
        actorType: query.actor_type,
        actorId: query.actor_id,
        fromId: from && idBound('aud', from, 'first'),
        toId: to && idBound('aud', to, 'last'),
        cursor: query.cursor,
        limit: query.limit + 1,
      });
      const hasMore = rows.length > query.limit;
      const items = rows.slice(0, query.limit).map(repo.toAuditEntry);
      return {
        items,
        limit: query.limit,
        has_more: hasMore,
        next_cursor: hasMore ? items[items.length - 1]!.id : null,
      };
    },

    /** Deletes a batch of entries older than the retention; true when there may be more. */
    async prune(): Promise<boolean> {
      const bound = idBound('aud', new Date(Date.now() - retentionDays * DAY_MS), 'first');
      const deleted = await repo.deleteBefore(db, bound, PRUNE_BATCH);
      if (deleted > 0) logger.info({ deleted, retention_days: retentionDays }, 'pruned the audit log');
      return deleted === PRUNE_BATCH;
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
