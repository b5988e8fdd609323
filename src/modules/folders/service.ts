import { conflict, notFound, validationError } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { checkName } from '../files/rules.ts';

export interface Folder {
  id: string;
  name: string;
  parent_id: string | null;
  path: string;
  created_at: string;
  updated_at: string;
}

interface Row extends Omit<Folder, 'created_at' | 'updated_at'> {
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, name, parent_id, path, created_at, updated_at';
const toFolder = (row: Row): Folder => ({
  ...row,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString(),
});
const isUniqueViolation = (error: unknown) => (error as { code?: string }).code === '23505';
const siblingTaken = (name: string) =>
  conflict(`A folder named ${JSON.stringify(name)} already exists here`, { field: 'name' });

/**
 * Row locks: `update` for the folder being changed or deleted; `key share` for a folder about to be
 * referenced (a parent, a file's folder), so that a concurrent delete waits and then finds it in use.
 */
type Lock = 'update' | 'key share';

async function find(q: Queryable, projectId: string, id: string, lock?: Lock): Promise<Row | undefined> {
  const [row] = await q.query<Row>(
    `SELECT ${COLUMNS} FROM folders WHERE project_id = $1 AND id = $2${lock ? ` FOR ${lock.toUpperCase()}` : ''}`,
    [projectId, id],
  );
  return row;
}

async function findChild(q: Queryable, projectId: string, parent: Row | undefined, name: string) {
  const [row] = await q.query<Row>(
    `SELECT ${COLUMNS} FROM folders WHERE project_id = $1 AND parent_id IS NOT DISTINCT FROM $2 AND name = $3`,
    [projectId, parent?.id ?? null, name],
  );
  return row;
}

async function insert(q: Queryable, projectId: string, name: string, parent: Row | undefined): Promise<Row> {
  const [row] = await q.query<Row>(
    `INSERT INTO folders (id, project_id, parent_id, name, path) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
    [newId('fld'), projectId, parent?.id ?? null, name, parent ? `${parent.path}/${name}` : name],
  );
  return row!;
}

/**
 * The project's folder lock, held to the end of the transaction by everything that writes paths
 * from a folder's path: renames and moves exclusively (they rewrite the paths of a subtree, and two
 * crossing moves could make a cycle), creates shared (they do not wait for each other, only for a
 * rename or move, so that the parent path a new folder is given stays current until it commits).
 */
async function lockFolders(q: Queryable, projectId: string, mode: 'exclusive' | 'shared'): Promise<void> {
  const lock = mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock';
  await q.query(`SELECT ${lock}(hashtextextended($1, 0))`, [`coffer:folders:${projectId}`]);
}

/** "" is no folder id, and not the root either (that is null): refused rather than guessed. */
function checkParentId(parentId: string | null | undefined): void {
  if (parentId === '')
    throw validationError('parent_id must be a folder id, or null for the root', { field: 'parent_id' });
}

export function createFolderService(db: Db) {
  /**
   * A new folder `name` in `parent` (found before, outside any transaction), or the one another
   * request created there meanwhile.
   */
  async function createChild(
    projectId: string,
    parent: Row | undefined,
    name: string,
    field: string,
  ): Promise<Row> {
    try {
      // A transaction of its own, so that the parent's path is read again under the folder lock; the
      // retry read runs after it, since a failed statement aborts a PostgreSQL transaction.
      return await db.tx(async (q) => {
        await lockFolders(q, projectId, 'shared');
        const current = parent && (await find(q, projectId, parent.id, 'key share'));
        if (parent && !current) {
          throw conflict('A folder of the path was removed meanwhile: try again', { field });
        }
        return insert(q, projectId, name, current);
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      // Created concurrently by another request: use that one.
      const existing = await findChild(db, projectId, parent, name);
      if (!existing) throw conflict('A folder of the path changed meanwhile: try again', { field });
      return existing;
    }
  }

  return {
    async create(projectId: string, name: string, parentId: string | null | undefined): Promise<Folder> {
      checkName('name', name);
      checkParentId(parentId);
      return db.tx(async (q) => {
        await lockFolders(q, projectId, 'shared');
        const parent = parentId ? await find(q, projectId, parentId, 'key share') : undefined;
        if (parentId && !parent)
          throw validationError('parent_id is not a folder of this project', { field: 'parent_id' });
        try {
          return toFolder(await insert(q, projectId, name, parent));
        } catch (error) {
          if (isUniqueViolation(error)) throw siblingTaken(name);
          throw error;
        }
      });
    },

    async list(projectId: string, parentId: string | undefined): Promise<Folder[]> {
      const rows = await db.query<Row>(
        `SELECT ${COLUMNS} FROM folders WHERE project_id = $1 AND parent_id IS NOT DISTINCT FROM $2 ORDER BY name`,
        [projectId, parentId ?? null],
      );
      return rows.map(toFolder);
    },

    async get(projectId: string, id: string): Promise<Folder> {
      const row = await find(db, projectId, id);
      if (!row) throw notFound('Folder');
      return toFolder(row);
    },

    /** Renames and/or moves a folder; the paths of its whole subtree follow. */
    async update(
      projectId: string,
      id: string,
      changes: { name?: string; parent_id?: string | null },
    ): Promise<Folder> {
      if (changes.name !== undefined) checkName('name', changes.name);
      checkParentId(changes.parent_id);
      return db.tx(async (q) => {
        await lockFolders(q, projectId, 'exclusive');
        const folder = await find(q, projectId, id, 'update');
        if (!folder) throw notFound('Folder');
        const name = changes.name ?? folder.name;
        const parentId = changes.parent_id === undefined ? folder.parent_id : changes.parent_id;
        let parentPath: string | undefined;
        if (parentId) {
          const parent = await find(q, projectId, parentId, 'key share');
          if (!parent)
            throw validationError('parent_id is not a folder of this project', { field: 'parent_id' });
          if (parent.id === folder.id || parent.path.startsWith(`${folder.path}/`)) {
            throw validationError('A folder cannot be moved into itself or its own subfolders', {
              field: 'parent_id',
            });
          }
          parentPath = parent.path;
        }
        const path = parentPath ? `${parentPath}/${name}` : name;
        try {
          // The folder and every descendant: swap the old path prefix for the new one.
          await q.query(
            `UPDATE folders SET path = $3 || substr(path, length($2) + 1), updated_at = now()
             WHERE project_id = $1 AND (path = $2 OR starts_with(path, $2 || '/'))`,
            [projectId, folder.path, path],
          );
          const [row] = await q.query<Row>(
            `UPDATE folders SET name = $3, parent_id = $4 WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
            [projectId, id, name, parentId],
          );
          return toFolder(row!);
        } catch (error) {
          if (isUniqueViolation(error)) throw siblingTaken(name);
          throw error;
        }
      });
    },

    /** Deletes an empty folder: one holding subfolders, files that are not deleted, or the lock of a live upload token is a 409. */
    async remove(projectId: string, id: string): Promise<void> {
      await db.tx(async (q) => {
        const folder = await find(q, projectId, id, 'update');
        if (!folder) throw notFound('Folder');
        const [usage] = await q.query<{ folders: boolean; files: boolean; tokens: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM folders WHERE project_id = $1 AND parent_id = $2) AS folders,
                  EXISTS (SELECT 1 FROM files WHERE project_id = $1 AND folder_id = $2 AND deleted_at IS NULL) AS files,
                  EXISTS (SELECT 1 FROM upload_tokens WHERE folder_id = $2 AND expires_at > now()) AS tokens`,
          [projectId, id],
        );
        if (usage!.folders || usage!.files) {
          throw conflict('The folder is not empty', { subfolders: usage!.folders, files: usage!.files });
        }
        // A live upload token locked to the folder would otherwise silently upload to the root.
        if (usage!.tokens)
          throw conflict('An unexpired upload token is locked to this folder', { upload_tokens: true });
        await q.query('DELETE FROM folders WHERE project_id = $1 AND id = $2', [projectId, id]);
      });
    },

    /**
     * Whether the folder exists in the project (used to check folder references in request bodies);
     * within `q`'s transaction it stays (a concurrent delete waits, then finds the reference).
     */
    async exists(q: Queryable, projectId: string, id: string): Promise<boolean> {
      return (await find(q, projectId, id, 'key share')) !== undefined;
    },

    /** The folder at a slash-separated path, creating the missing segments. */
    async ensurePath(projectId: string, path: string, field = 'folder_path'): Promise<Folder> {
      const names = path.split('/').filter((segment) => segment.length > 0);
      if (names.length === 0) throw validationError(`${field} must name at least one folder`, { field });
      for (const name of names) checkName(field, name);
      let parent: Row | undefined;
      for (const name of names) {
        parent =
          (await findChild(db, projectId, parent, name)) ??
          (await createChild(projectId, parent, name, field));
      }
      return toFolder(parent!);
    },
  };
}

export type FolderService = ReturnType<typeof createFolderService>;
