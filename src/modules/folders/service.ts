import { conflict, notFound, validationError } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import { newId } from '../../lib/ids.ts';
import { checkName } from '../files/rules.ts';
import type { Folder } from './repo.ts';
import * as repo from './repo.ts';

const siblingTaken = (name: string) =>
  conflict(`A folder named ${JSON.stringify(name)} already exists here`, { field: 'name' });

/**
 * A new folder `name` in `parent` (the root when undefined), or undefined when one of that name is
 * there; `marker`: whether it is a key of its own in the S3 view, as folders made on purpose are.
 */
function insert(
  q: Queryable,
  projectId: string,
  name: string,
  parent: Folder | undefined,
  marker: boolean,
): Promise<Folder | undefined> {
  return repo.insertFolder(q, {
    id: newId('fld'),
    projectId,
    parentId: parent?.id ?? null,
    name,
    path: parent ? `${parent.path}/${name}` : name,
    marker,
  });
}

/** How ensurePath names its path in refusals, and whether the folders it creates are made on purpose. */
export interface PathUse {
  field?: string;
  /** Folders an S3 key's path needs: they are no keys of their own in the S3 view, as in S3. */
  implied?: boolean;
}

/** "" is no folder id, and not the root either (that is null): refused rather than guessed. */
function checkParentId(parentId: string | null | undefined): void {
  if (parentId === '')
    throw validationError('parent_id must be a folder id, or null for the root', { field: 'parent_id' });
}

/** The folder names of a slash-separated path (slashes repeated or at its ends are no names), checked. */
function namesOf(path: string, field: string): string[] {
  const names = path.split('/').filter((segment) => segment.length > 0);
  if (names.length === 0) throw validationError(`${field} must name at least one folder`, { field });
  for (const name of names) checkName(field, name);
  return names;
}

export function createFolderService(db: Db) {
  /**
   * The folder at the path `names` within `q`'s transaction, the missing ones created there (made on
   * purpose when `marker`, else implied); those found are locked, so that a concurrent delete waits
   * and finds them in use.
   */
  async function pathIn(
    q: Queryable,
    projectId: string,
    names: string[],
    marker: boolean,
    field: string,
  ): Promise<Folder> {
    const existing = await repo.findFolderByPath(q, projectId, names.join('/'), 'key share');
    if (existing) return existing;
    // Under the folder lock, so that the paths new folders are given stay current until they commit.
    await repo.lockFolders(q, projectId, 'shared');
    let parent: Folder | undefined;
    for (const name of names) {
      const find = () => repo.findChild(q, projectId, parent?.id ?? null, name, 'key share');
      // A request creating the same folder at once: its insert wins, and this one takes its folder.
      const folder = (await find()) ?? (await insert(q, projectId, name, parent, marker)) ?? (await find());
      if (!folder) throw conflict('A folder of the path changed meanwhile: try again', { field });
      parent = folder;
    }
    return parent!;
  }

  /** The folder at a slash-separated path, creating the missing segments. */
  async function ensurePath(projectId: string, path: string, use: PathUse = {}): Promise<Folder> {
    const { field = 'folder_path', implied = false } = use;
    const names = namesOf(path, field);
    // Most paths exist already (every S3 PutObject under a prefix names one): one lookup by the whole
    // path, outside any transaction.
    const existing = await repo.findFolderByPath(db, projectId, names.join('/'));
    if (existing) return existing;
    return db.tx((q) => pathIn(q, projectId, names, !implied, field));
  }

  return {
    async create(projectId: string, name: string, parentId: string | null | undefined): Promise<Folder> {
      checkName('name', name);
      checkParentId(parentId);
      return db.tx(async (q) => {
        await repo.lockFolders(q, projectId, 'shared');
        const parent = parentId ? await repo.findFolder(q, projectId, parentId, 'key share') : undefined;
        if (parentId && !parent)
          throw validationError('parent_id is not a folder of this project', { field: 'parent_id' });
        const folder = await insert(q, projectId, name, parent, true);
        if (!folder) throw siblingTaken(name);
        return folder;
      });
    },

    async list(projectId: string, parentId: string | undefined): Promise<Folder[]> {
      return repo.listChildren(db, projectId, parentId ?? null);
    },

    async get(projectId: string, id: string): Promise<Folder> {
      const folder = await repo.findFolder(db, projectId, id);
      if (!folder) throw notFound('Folder');
      return folder;
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
        await repo.lockFolders(q, projectId, 'exclusive');
        const folder = await repo.findFolder(q, projectId, id, 'update');
        if (!folder) throw notFound('Folder');
        const name = changes.name ?? folder.name;
        const parentId = changes.parent_id === undefined ? folder.parent_id : changes.parent_id;
        let parentPath: string | undefined;
        if (parentId) {
          const parent = await repo.findFolder(q, projectId, parentId, 'key share');
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
          await repo.rewritePaths(q, projectId, folder.path, path);
          return await repo.renameFolder(q, projectId, id, { name, parentId });
        } catch (error) {
          if (repo.isUniqueViolation(error)) throw siblingTaken(name);
          throw error;
        }
      });
    },

    /** Deletes an empty folder: one holding subfolders, files that are not deleted, or the lock of a live upload token is a 409. */
    async remove(projectId: string, id: string): Promise<void> {
      await db.tx(async (q) => {
        const folder = await repo.findFolder(q, projectId, id, 'update');
        if (!folder) throw notFound('Folder');
        const refs = await repo.folderReferences(q, projectId, id);
        if (refs.folders || refs.files) {
          throw conflict('The folder is not empty', { subfolders: refs.folders, files: refs.files });
        }
        // A live upload token locked to the folder would otherwise silently upload to the root.
        if (refs.tokens)
          throw conflict('An unexpired upload token is locked to this folder', { upload_tokens: true });
        await repo.deleteFolder(q, projectId, id);
      });
    },

    /**
     * Whether the folder exists in the project (used to check folder references in request bodies);
     * within `q`'s transaction it stays (a concurrent delete waits, then finds the reference).
     */
    async exists(q: Queryable, projectId: string, id: string): Promise<boolean> {
      return (await repo.findFolder(q, projectId, id, 'key share')) !== undefined;
    },

    /** The folder at a slash-separated path, when it exists. */
    findByPath(projectId: string, path: string): Promise<Folder | undefined> {
      return repo.findFolderByPath(db, projectId, path);
    },

    ensurePath,

    /**
     * S3's PutObject of `path/`: the folder becomes a key of its own (a marker), created when missing
     * (the folders above it are only implied, as S3 makes no keys for them). `guard` runs in the one
     * transaction that creates and marks them, once the path is locked or created there: a delete of
     * the key then either committed before (the guard finds no marker) or waits; a refusal leaves no
     * folder behind.
     */
    async markPath(projectId: string, path: string, guard?: (q: Queryable) => Promise<void>): Promise<void> {
      const names = namesOf(path, 'key');
      await db.tx(async (q) => {
        const folder = await pathIn(q, projectId, names, false, 'key');
        await guard?.(q);
        await repo.setMarker(q, projectId, folder.id, true);
      });
    },

    /**
     * The marker at `path` (its folder's creation time), when that folder is a key of its own in the
     * S3 view; read with `q` within a transaction.
     */
    markerAt(projectId: string, path: string, q: Queryable = db): Promise<{ created_at: Date } | undefined> {
      return repo.findMarker(q, projectId, path);
    },

    /**
     * S3's DeleteObject of `path/`: an empty folder is removed; one that still holds something (or
     * that a live upload token is locked to) stays and is only no key of its own any more, as
     * deleting a marker object in S3 leaves the keys under it.
     */
    async unmarkPath(projectId: string, path: string): Promise<void> {
      await db.tx(async (q) => {
        const folder = await repo.findFolderByPath(q, projectId, path, 'update');
        if (!folder) return;
        const refs = await repo.folderReferences(q, projectId, folder.id);
        if (refs.folders || refs.files || refs.tokens) await repo.setMarker(q, projectId, folder.id, false);
        else await repo.deleteFolder(q, projectId, folder.id);
      });
    },
  };
}

export type FolderService = ReturnType<typeof createFolderService>;
