import type { Queryable } from '../../infra/db.ts';
import { idBound } from '../../lib/ids.ts';
import { COLUMNS, type FileRow } from './repo.ts';

/**
 * The listing of a project's files: filtered, a page newest first, and the total of every match,
 * kept with every change where the filters allow (migrations 013 and 021), counted otherwise.
 */

export interface FileFilters {
  folderId?: string | null;
  q?: string;
  tags?: string[];
  category?: string;
  status?: string;
  dateFrom?: Date;
  dateTo?: Date;
  sizeMin?: number;
  sizeMax?: number;
  metadata?: Record<string, unknown>;
  uploadTokenId?: string;
}

/**
 * A file's id is made (on the server's clock) just before its row (created_at, on the database's): a
 * file created by a date has an id made by then, give or take this much clock difference.
 */
const ID_CLOCK_SLACK_MS = 86_400_000;

function likeEscape(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function filterSql(projectId: string, filters: FileFilters): { where: string[]; params: unknown[] } {
  const params: unknown[] = [projectId];
  const where = ['project_id = $1', 'deleted_at IS NULL'];
  const add = (sql: (p: string) => string, value: unknown) => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if (filters.folderId === null) where.push('folder_id IS NULL');
  else if (filters.folderId !== undefined) add((p) => `folder_id = ${p}`, filters.folderId);
  if (filters.q) add((p) => `lower(filename) LIKE ${p}`, `%${likeEscape(filters.q.toLowerCase())}%`);
  if (filters.tags?.length) add((p) => `tags @> ${p}::text[]`, filters.tags);
  if (filters.category) add((p) => `category = ${p}`, filters.category);
  if (filters.status) add((p) => `status = ${p}`, filters.status);
  if (filters.dateFrom) add((p) => `created_at >= ${p}`, filters.dateFrom);
  if (filters.dateTo) add((p) => `created_at <= ${p}`, filters.dateTo);
  if (filters.sizeMin !== undefined) add((p) => `size_bytes >= ${p}`, filters.sizeMin);
  if (filters.sizeMax !== undefined) add((p) => `size_bytes <= ${p}`, filters.sizeMax);
  if (filters.metadata) add((p) => `metadata @> ${p}::jsonb`, JSON.stringify(filters.metadata));
  if (filters.uploadTokenId) add((p) => `upload_token_id = ${p}`, filters.uploadTokenId);
  return { where, params };
}

/** Up to this many matches, a search's page is taken from all its matches, found through its indexes. */
const FEW_MATCHES = 5000;

/** Deltas a project may gather before a listing folds them into its counts (a fold costs about a page). */
const FOLD_AFTER = 1000;

/** The distinct tags a listing is filtered by, when they are its only filter ('' is no tag kept). */
function onlyTags({ tags, ...others }: FileFilters): string[] | undefined {
  if (!tags?.length || tags.includes('')) return undefined;
  return Object.values(others).every((value) => value === undefined) ? [...new Set(tags)] : undefined;
}

/**
 * Whether the total of a listing is kept with every change (migrations 013 and 021), not counted:
 * filtered by status, category and folder at most, or by tags alone.
 */
function countsKept(filters: FileFilters): boolean {
  const { folderId, status, category, tags, ...others } = filters;
  if (tags?.length) return onlyTags(filters) !== undefined;
  return Object.values(others).every((value) => value === undefined);
}

/** Folds the project's kept changes into its counts once a listing found more than FOLD_AFTER of them. */
async function foldWhenMany(q: Queryable, projectId: string, deltas: number): Promise<void> {
  if (deltas > FOLD_AFTER) await q.query('SELECT fold_file_counts($1)', [projectId]);
}

/** The kept total of files holding every one of several tags: the sum over the tag sets holding them. */
async function keptTagSetTotal(q: Queryable, projectId: string, tags: string[]): Promise<number> {
  const [row] = await q.query<{ total: number; deltas: number }>(
    `SELECT ((SELECT coalesce(sum(n), 0) FROM file_tag_set_counts WHERE project_id = $1 AND tags @> $2::text[])
         + coalesce(sum(n) FILTER (WHERE tags @> $2::text[]), 0))::int8 AS total,
       count(*)::int8 AS deltas
     FROM file_tag_set_deltas WHERE project_id = $1`,
    [projectId, tags],
  );
  await foldWhenMany(q, projectId, row!.deltas);
  return row!.total;
}

/** The kept total of a listing for which countsKept(filters). */
async function keptTotal(q: Queryable, projectId: string, filters: FileFilters): Promise<number> {
  const { folderId, status, category } = filters;
  const tags = onlyTags(filters);
  if (tags && tags.length > 1) return keptTagSetTotal(q, projectId, tags);
  const tag = tags?.[0];
  const params: unknown[] = [projectId];
  const where = ['project_id = $1'];
  const add = (column: string, value: string) => {
    params.push(value);
    where.push(`${column} = $${params.length}`);
  };
  add('tag', tag ?? '');
  if (status) add('status', status);
  if (category) add('category', category);
  if (folderId !== undefined) add('folder', folderId ?? '');
  const match = where.join(' AND ');
  // Over every folder, the folded counts' rows that sum them ('*'); the deltas are of one folder each.
  const folded = tag === undefined && folderId === undefined ? `${match} AND folder = '*'` : match;
  const [row] = await q.query<{ total: number; deltas: number }>(
    `SELECT coalesce(sum(n), 0)::int8 AS total, count(*) FILTER (WHERE delta)::int8 AS deltas FROM (
       SELECT n, false AS delta FROM file_counts WHERE ${folded}
       UNION ALL
       SELECT n, true FROM file_count_deltas WHERE ${match}
     ) AS kept`,
    params,
  );
  await foldWhenMany(q, projectId, row!.deltas);
  return row!.total;
}

/** One page, newest first, plus the count of every match (pagination aside). */
export async function listFiles(
  q: Queryable,
  projectId: string,
  filters: FileFilters,
  page: { limit: number; offset: number; cursor?: string },
): Promise<{ rows: FileRow[]; total: number }> {
  const { where, params } = filterSql(projectId, filters);
  const pageWhere = [...where];
  const pageParams = [...params];
  if (page.cursor !== undefined) {
    pageParams.push(page.cursor);
    pageWhere.push(`id < $${pageParams.length}`);
  }
  if (filters.dateTo) {
    // Newest first from the end of the range, not from the newest file.
    pageParams.push(idBound('file', new Date(filters.dateTo.getTime() + ID_CLOCK_SLACK_MS), 'last'));
    pageWhere.push(`id <= $${pageParams.length}`);
  }
  pageParams.push(page.limit + 1);
  const limit = `$${pageParams.length}`;
  let skip = '';
  if (page.cursor === undefined && page.offset > 0) {
    pageParams.push(page.offset);
    skip = ` OFFSET $${pageParams.length}`;
  }
  const matching = `SELECT id FROM files WHERE ${pageWhere.join(' AND ')}`;
  // The rows skipped are found by id alone (from an index, without reading them); only the page is read.
  const pageOf = (ids: string) =>
    q.query<FileRow>(
      `SELECT ${COLUMNS} FROM files WHERE id IN (${ids} ORDER BY id DESC LIMIT ${limit}${skip}) ORDER BY id DESC`,
      pageParams,
    );
  const newestFirst = () => pageOf(matching);
  if (countsKept(filters)) {
    const [rows, total] = await Promise.all([newestFirst(), keptTotal(q, projectId, filters)]);
    return { rows, total };
  }
  // Counted first: the planner cannot tell how many files a search matches, and walking every file
  // newest first for the few that match took a second at a million files. A search of few matches
  // finds them all through its indexes (OFFSET 0 keeps the LIMIT out of that plan), then sorts them.
  const [{ total }] = (await q.query<{ total: number }>(
    `SELECT count(*)::int8 AS total FROM files WHERE ${where.join(' AND ')}`,
    params,
  )) as [{ total: number }];
  const rows = await (total <= FEW_MATCHES
    ? pageOf(`SELECT id FROM (${matching} OFFSET 0) AS found`)
    : newestFirst());
  return { rows, total };
}
