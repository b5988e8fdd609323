import type { Queryable } from '../../infra/db.ts';

/** The kept numbers of a project (view project_usage_kept); see migration 011 for what each counts. */
export interface UsageRow {
  project_id: string;
  uploading_files: number;
  uploading_bytes: number;
  processing_files: number;
  processing_bytes: number;
  ready_files: number;
  ready_bytes: number;
  failed_files: number;
  failed_bytes: number;
  quarantined_files: number;
  quarantined_bytes: number;
  deleted_files: number;
  deleted_bytes: number;
  versions_bytes: number;
  versions_reserved_bytes: number;
}

export type Counter = Exclude<keyof UsageRow, 'project_id'>;

export const COUNTERS: readonly Counter[] = [
  'uploading_files',
  'uploading_bytes',
  'processing_files',
  'processing_bytes',
  'ready_files',
  'ready_bytes',
  'failed_files',
  'failed_bytes',
  'quarantined_files',
  'quarantined_bytes',
  'deleted_files',
  'deleted_bytes',
  'versions_bytes',
  'versions_reserved_bytes',
];

export const emptyUsage = (projectId: string): UsageRow => ({
  project_id: projectId,
  ...(Object.fromEntries(COUNTERS.map((counter) => [counter, 0])) as Record<Counter, number>),
});

/** The totals the quotas apply to. */
export function totals(row: UsageRow) {
  return {
    // Every byte still stored, until the collector removes it.
    usedBytes:
      row.processing_bytes +
      row.ready_bytes +
      row.failed_bytes +
      row.quarantined_bytes +
      row.deleted_bytes +
      row.versions_bytes,
    reservedBytes: row.uploading_bytes + row.versions_reserved_bytes,
    files: row.uploading_files + row.processing_files + row.ready_files + row.deleted_files,
  };
}

/** What the triggers keep for the project: its row plus the deltas not folded into it yet. */
export async function findUsage(q: Queryable, projectId: string): Promise<UsageRow> {
  const [row] = await q.query<UsageRow>(
    `SELECT project_id, ${COUNTERS.join(', ')} FROM project_usage_kept WHERE project_id = $1`,
    [projectId],
  );
  return row ?? emptyUsage(projectId);
}

/** Every project's kept numbers (metrics). */
export const findAllUsage = (q: Queryable): Promise<UsageRow[]> =>
  q.query<UsageRow>(`SELECT project_id, ${COUNTERS.join(', ')} FROM project_usage_kept`);

/**
 * Moves the deltas of every project into its row; answers how many it moved. Each delta moves once
 * even when two folds run at once (the second finds it deleted), and a change made meanwhile only
 * adds a delta, so nothing waits on the fold but another fold of the same project.
 */
export async function foldUsage(q: Queryable): Promise<number> {
  const [result] = await q.query<{ folded: number }>(
    `WITH moved AS (DELETE FROM project_usage_deltas RETURNING *),
     summed AS (
       SELECT project_id, count(*) AS deltas, ${COUNTERS.map((c) => `sum(${c})::bigint AS ${c}`).join(', ')}
       FROM moved GROUP BY project_id
     ),
     added AS (
       INSERT INTO project_usage AS u (project_id, ${COUNTERS.join(', ')})
       SELECT project_id, ${COUNTERS.join(', ')} FROM summed
       ON CONFLICT (project_id) DO UPDATE SET ${COUNTERS.map((c) => `${c} = u.${c} + excluded.${c}`).join(', ')}
     )
     SELECT coalesce(sum(deltas), 0)::bigint AS folded FROM summed`,
  );
  return result?.folded ?? 0;
}

/**
 * Per project whose kept numbers differ from the ones its rows give, the difference (actual − kept).
 * One statement, so both sides are read at the same moment: what it finds is drift, never a change
 * still in flight (the triggers keep the numbers in the transaction of every change).
 */
export async function findDrift(q: Queryable): Promise<UsageRow[]> {
  const differences = COUNTERS.map((counter) => `a.${counter} - coalesce(u.${counter}, 0) AS ${counter}`);
  return q.query<UsageRow>(
    `SELECT * FROM (
       SELECT a.project_id, ${differences.join(', ')}
       FROM project_usage_actual a LEFT JOIN project_usage_kept u ON u.project_id = a.project_id
     ) AS drift
     WHERE ${COUNTERS.map((counter) => `${counter} <> 0`).join(' OR ')}`,
  );
}

/** Adds `delta` to the kept numbers of its project (its row made when missing). */
export async function addToUsage(q: Queryable, delta: UsageRow): Promise<void> {
  await q.query(
    `INSERT INTO project_usage AS u (project_id, ${COUNTERS.join(', ')})
     VALUES ($1, ${COUNTERS.map((_, i) => `$${i + 2}`).join(', ')})
     ON CONFLICT (project_id) DO UPDATE SET ${COUNTERS.map((c) => `${c} = u.${c} + excluded.${c}`).join(', ')}`,
    [delta.project_id, ...COUNTERS.map((counter) => delta[counter])],
  );
}

// Any constant but the migrations' works; it only has to be the same for every Coffer process.
const RECONCILE_LOCK = 7_302_431_119;
/** The first key of the per-project admission locks (the second is the project id's hash). */
const QUOTA_LOCK = 730_243;

/** Admits one upload of the project at a time: held until the transaction ends. */
export async function lockQuotaAdmission(q: Queryable, projectId: string): Promise<void> {
  await q.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [QUOTA_LOCK, projectId]);
}

/** Runs one reconcile pass at a time in the whole deployment: held until the transaction ends. */
export async function lockReconcile(q: Queryable): Promise<void> {
  await q.query('SELECT pg_advisory_xact_lock($1)', [RECONCILE_LOCK]);
}
