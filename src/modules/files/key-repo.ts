import type { Queryable } from '../../infra/db.ts';
import { COLUMNS, type FileRow } from './repo.ts';

/**
 * The S3 view of a project's files (migration 015): a file's key is its folder's path and its name
 * joined by '/', an empty folder made on purpose (a marker, migration 023) is the key `path/`. Only
 * files past their upload and not deleted are seen, and a key shows the newest file that holds it.
 */

/** What a listing shows of a file: what S3 lists of an object (and its id, for its versions). */
export type ListedFile = Pick<FileRow, 'id' | 'size_bytes' | 'etag' | 'checksum_sha256' | 'updated_at'>;

/** What a listing finds at a key: the newest file holding it, or a folder. */
export type KeyEntry =
  | { key: string; file: ListedFile }
  | { key: string; folder: { id: string; created_at: Date } };

/** The files S3 shows (the condition of the partial index files_s3_key), columns of `alias`. */
const shown = (alias = 'files') =>
  `${alias}.deleted_at IS NULL AND ${alias}.status IN ('processing', 'ready')`;

/** The newest file S3 shows at the key `key` of the project `projectId` (both SQL expressions). */
const newestAt = (projectId: string, key: string) =>
  `SELECT ${COLUMNS} FROM files WHERE project_id = ${projectId} AND s3_key = ${key} AND ${shown()} ORDER BY id DESC LIMIT 1`;

/** The newest file S3 shows at `key`, when there is one. */
export async function findByKey(q: Queryable, projectId: string, key: string): Promise<FileRow | undefined> {
  const [row] = await q.query<FileRow>(newestAt('$1', '$2'), [projectId, key]);
  return row;
}

/**
 * Holds the key `key` of the project until the transaction ends: writes that check what the key holds
 * before recording take it first, so that they check one after the other.
 */
export async function lockKey(q: Queryable, projectId: string, key: string): Promise<void> {
  await q.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`${projectId}/${key}`]);
}

/**
 * The newest file S3 shows at `key`, read once the key is held (lockKey): no write that checks the key
 * changes what it shows until the transaction ends.
 */
export async function heldAt(q: Queryable, projectId: string, key: string): Promise<FileRow | undefined> {
  await lockKey(q, projectId, key);
  return findByKey(q, projectId, key);
}

/** The S3 key of the file `fileId`, and the upload token it was made with (null: another credential). */
export async function keyOfFile(
  q: Queryable,
  projectId: string,
  fileId: string,
): Promise<{ s3_key: string | null; upload_token_id: string | null } | undefined> {
  const [row] = await q.query<{ s3_key: string | null; upload_token_id: string | null }>(
    'SELECT s3_key, upload_token_id FROM files WHERE project_id = $1 AND id = $2',
    [projectId, fileId],
  );
  return row;
}

const FILE_FIELDS = COLUMNS.split(',').map((name) => name.trim());

/**
 * The newest file S3 shows at a key, joined to another lookup of the same project so that both come
 * in one round trip: `join` the lateral join, `columns` its columns (`at_key_<column>`), which
 * `fileAtKey` reads back from a row of the statement.
 */
export const joinFileAtKey = (projectId: string, key: string) => ({
  // files.project_id has the default collation and ids elsewhere "C": compared in the column's own,
  // or files_s3_key could not serve the comparison.
  join: `LEFT JOIN LATERAL (${newestAt(`${projectId} COLLATE "default"`, key)}) at_key ON true`,
  columns: FILE_FIELDS.map((name) => `at_key.${name} AS at_key_${name}`).join(', '),
});

/** The file of a row that `joinFileAtKey` joined, undefined when the key shows none. */
export function fileAtKey(row: object): FileRow | undefined {
  const columns = row as Record<string, unknown>;
  if (columns.at_key_id === null) return undefined;
  return Object.fromEntries(
    FILE_FIELDS.map((name) => [name, columns[`at_key_${name}`]]),
  ) as unknown as FileRow;
}

/** Bounds of a walk in binary key order: keys after `after` (exclusive), from `from` on, below `below`. */
export interface KeyRange {
  after?: string;
  from?: string;
  below?: string;
}

/** Binary UTF-8 order, which is code point order (JavaScript's `<` compares UTF-16 units instead). */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** `column` within `range`, as SQL conditions whose values are appended to `params`. */
function within(column: string, range: KeyRange, params: unknown[]): string {
  let where = '';
  for (const [op, value] of [
    ['>', range.after],
    ['>=', range.from],
    ['<', range.below],
  ] as const) {
    if (value === undefined) continue;
    params.push(value);
    where += ` AND ${column} ${op} $${params.length}`;
  }
  return where;
}

/** Up to `limit` keys of the project in binary (UTF-8) order within `range`, files and folders merged. */
export async function listKeys(
  q: Queryable,
  projectId: string,
  range: KeyRange,
  limit: number,
): Promise<KeyEntry[]> {
  const fileParams: unknown[] = [projectId, limit];
  // A page is a thousand rows: built as one JSON value by the database, it is decoded once instead of
  // field by field (three times faster on the embedded engine), and only the listed columns are read.
  const [listed] = await q.query<{
    page: [string, string, number, string | null, string | null, string][];
  }>(
    `SELECT coalesce(json_agg(json_build_array(key, id, size_bytes, etag, checksum_sha256, updated_at) ORDER BY key), '[]') AS page
     FROM (SELECT DISTINCT ON (s3_key) s3_key AS key, id, size_bytes, etag, checksum_sha256, updated_at FROM files
           WHERE project_id = $1 AND ${shown()}${within('s3_key', range, fileParams)}
           ORDER BY s3_key, id DESC LIMIT $2) listed`,
    fileParams,
  );
  const files = listed!.page.map(([key, id, size_bytes, etag, checksum_sha256, updated_at]) => ({
    key,
    file: { id, size_bytes, etag, checksum_sha256, updated_at: new Date(updated_at) },
  }));
  const keyOf = (alias: string) => `(${alias}.path || '/') COLLATE "C"`;
  // Keys under `d.path/` are those from it (exclusive) to `d.path0`: '0' follows '/' in binary order.
  const under = (key: string) => `${key} > ${keyOf('d')} AND ${key} < (d.path || '0') COLLATE "C"`;
  const folderParams: unknown[] = [projectId, limit];
  // Only folders made on purpose (markers, migration 023) are keys, and only empty ones: a folder
  // that holds keys shows through them. Empty means no key under its path in this view (files S3
  // shows, other markers): the folders a key's path implied are no keys, so they fill none.
  const folders = await q.query<{ key: string; id: string; created_at: Date }>(
    `SELECT ${keyOf('d')} AS key, id, created_at FROM folders d
     WHERE project_id = $1 AND s3_marker${within(keyOf('d'), range, folderParams)}
       AND NOT EXISTS (SELECT 1 FROM files f
                       WHERE f.project_id = d.project_id AND ${shown('f')} AND ${under('f.s3_key')})
       AND NOT EXISTS (SELECT 1 FROM folders c
                       WHERE c.project_id = d.project_id AND c.s3_marker AND ${under(keyOf('c'))})
     ORDER BY ${keyOf('d')} LIMIT $2`,
    folderParams,
  );
  return mergeByKey(
    files,
    folders.map(({ key, id, created_at }) => ({ key, folder: { id, created_at } })),
    limit,
  );
}

/**
 * Two lists, each already in binary key order (both queries order by a "C" collation), as one of at
 * most `limit` entries: a merge compares each key once, where a sort would compare (and encode) a
 * thousand keys many times over.
 */
function mergeByKey(files: KeyEntry[], folders: KeyEntry[], limit: number): KeyEntry[] {
  if (folders.length === 0) return files.slice(0, limit);
  const merged: KeyEntry[] = [];
  let i = 0;
  let j = 0;
  while (merged.length < limit && (i < files.length || j < folders.length)) {
    const takeFile =
      j >= folders.length || (i < files.length && compareKeys(files[i]!.key, folders[j]!.key) <= 0);
    merged.push(takeFile ? files[i++]! : folders[j++]!);
  }
  return merged;
}
