import type { Queryable } from '../../infra/db.ts';

export interface Folder {
  id: string;
  name: string;
  parent_id: string | null;
  path: string;
  created_at: string;
  updated_at: string;
}

interface FolderRow extends Omit<Folder, 'created_at' | 'updated_at'> {
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, name, parent_id, path, created_at, updated_at';
const toFolder = (row: FolderRow): Folder => ({
  ...row,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});

/** A statement broke a unique index: here, a sibling of the same name. */
export const isUniqueViolation = (error: unknown) => (error as { code?: string }).code === '23505';

/**
 * Row locks: `update` for the folder being changed or deleted; `key share` for a folder about to be
 * referenced (a parent, a file's folder), so that a concurrent delete waits and then finds it in use.
 */
export type Lock = 'update' | 'key share';

export async function findFolder(
  q: Queryable,
  projectId: string,
  id: string,
  lock?: Lock,
): Promise<Folder | undefined> {
  const [row] = await q.query<FolderRow>(
    `SELECT ${COLUMNS} FROM folders WHERE project_id = $1 AND id = $2${lock ? ` FOR ${lock.toUpperCase()}` : ''}`,
    [projectId, id],
  );
  return row && toFolder(row);
}

/** The folder at the slash-joined `path` from the root. */
export async function findFolderByPath(
  q: Queryable,
  projectId: string,
  path: string,
  lock?: Lock,
): Promise<Folder | undefined> {
  const [row] = await q.query<FolderRow>(
    `SELECT ${COLUMNS} FROM folders WHERE project_id = $1 AND path = $2${lock ? ` FOR ${lock.toUpperCase()}` : ''}`,
    [projectId, path],
  );
  return row && toFolder(row);
}

/** When the folder at `path` is a key of its own in the S3 view (migration 023), when it was made. */
export async function findMarker(
  q: Queryable,
  projectId: string,
  path: string,
): Promise<{ created_at: Date } | undefined> {
  const [row] = await q.query<{ created_at: Date }>(
    'SELECT created_at FROM folders WHERE project_id = $1 AND path = $2 AND s3_marker',
    [projectId, path],
  );
  return row;
}

/** Makes the folder a key of its own in the S3 view, or no longer one; false when it is gone. */
export async function setMarker(
  q: Queryable,
  projectId: string,
  id: string,
  marker: boolean,
): Promise<boolean> {
  const rows = await q.query(
    'UPDATE folders SET s3_marker = $3 WHERE project_id = $1 AND id = $2 RETURNING id',
    [projectId, id, marker],
  );
  return rows.length > 0;
}

/** The folder `name` in `parentId` (null: the root). */
export async function findChild(
  q: Queryable,
  projectId: string,
  parentId: string | null,
  name: string,
  lock?: Lock,
): Promise<Folder | undefined> {
  const [row] = await q.query<FolderRow>(
    `SELECT ${COLUMNS} FROM folders WHERE project_id = $1 AND parent_id IS NOT DISTINCT FROM $2 AND name = $3${lock ? ` FOR ${lock.toUpperCase()}` : ''}`,
    [projectId, parentId, name],
  );
  return row && toFolder(row);
}

/** The folders in `parentId` (null: the root), by name. */
export async function listChildren(
  q: Queryable,
  projectId: string,
  parentId: string | null,
): Promise<Folder[]> {
  const rows = await q.query<FolderRow>(
    `SELECT ${COLUMNS} FROM folders WHERE project_id = $1 AND parent_id IS NOT DISTINCT FROM $2 ORDER BY name`,
    [projectId, parentId],
  );
  return rows.map(toFolder);
}

export async function insertFolder(
  q: Queryable,
  folder: {
    id: string;
    projectId: string;
    parentId: string | null;
    name: string;
    path: string;
    /** Whether it is a key of its own in the S3 view (migration 023). */
    marker: boolean;
  },
): Promise<Folder | undefined> {
  // Undefined when a folder of that name or path is there: ON CONFLICT waits for a concurrent insert
  // of the same folder to end instead of aborting the transaction, so that the caller can take it.
  const [row] = await q.query<FolderRow>(
    `INSERT INTO folders (id, project_id, parent_id, name, path, s3_marker) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
    [folder.id, folder.projectId, folder.parentId, folder.name, folder.path, folder.marker],
  );
  return row && toFolder(row);
}

/**
 * The project's folder lock, held to the end of the transaction by everything that writes paths
 * from a folder's path: renames and moves exclusively (they rewrite the paths of a subtree, and two
 * crossing moves could make a cycle), creates shared (they do not wait for each other, only for a
 * rename or move, so that the parent path a new folder is given stays current until it commits).
 */
export async function lockFolders(
  q: Queryable,
  projectId: string,
  mode: 'exclusive' | 'shared',
): Promise<void> {
  const lock = mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock';
  await q.query(`SELECT ${lock}(hashtextextended($1, 0))`, [`coffer:folders:${projectId}`]);
}

/** Gives the folder at `from` and every descendant the path prefix `to` instead. */
export async function rewritePaths(q: Queryable, projectId: string, from: string, to: string): Promise<void> {
  await q.query(
    `UPDATE folders SET path = $3 || substr(path, length($2) + 1), updated_at = now()
     WHERE project_id = $1 AND (path = $2 OR starts_with(path, $2 || '/'))`,
    [projectId, from, to],
  );
}

export async function renameFolder(
  q: Queryable,
  projectId: string,
  id: string,
  changes: { name: string; parentId: string | null },
): Promise<Folder> {
  const [row] = await q.query<FolderRow>(
    `UPDATE folders SET name = $3, parent_id = $4 WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [projectId, id, changes.name, changes.parentId],
  );
  return toFolder(row!);
}

/**
 * What still refers to the folder: subfolders, files not deleted, unexpired upload tokens, in one
 * round trip. Files and upload tokens belong to other modules: they are only read here.
 */
export async function folderReferences(
  q: Queryable,
  projectId: string,
  id: string,
): Promise<{ folders: boolean; files: boolean; tokens: boolean }> {
  const [row] = await q.query<{ folders: boolean; files: boolean; tokens: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM folders WHERE project_id = $1 AND parent_id = $2) AS folders,
            EXISTS (SELECT 1 FROM files WHERE project_id = $1 AND folder_id = $2 AND deleted_at IS NULL) AS files,
            EXISTS (SELECT 1 FROM upload_tokens WHERE folder_id = $2 AND expires_at > now()) AS tokens`,
    [projectId, id],
  );
  return row!;
}

export async function deleteFolder(q: Queryable, projectId: string, id: string): Promise<void> {
  await q.query('DELETE FROM folders WHERE project_id = $1 AND id = $2', [projectId, id]);
}
