import { LRUCache } from 'lru-cache';
import type { Db } from '../../infra/db.ts';
import type * as files from '../files/repo.ts';
import type { RenditionParams } from './params.ts';
import * as repo from './repo.ts';
import { type Content, type Target, targetOf } from './target.ts';

/** Files whose row this process remembers, to name their renditions before reading them. */
const KNOWN_FILES = 10_000;

const sameContent = (a: Content, b: Content) =>
  a.storage_key === b.storage_key && a.etag === b.etag && a.content_type === b.content_type;

/**
 * What this process last read of a file: its row, and the keys of its stored renditions (undefined
 * where not known: more than the statement lists, or not read since its content changed).
 */
export interface Seen {
  file: repo.ServableFile;
  stored: Set<string> | undefined;
}

/** A request's rendition worked out from what this process last read of the file. */
export interface Guess {
  seen: Seen;
  target: Target;
}

/**
 * What this process last read per file: a request's rendition key is worked out from it and read
 * with the file, in one statement.
 */
export function createKnownFiles(db: Db) {
  const seenFiles = new LRUCache<string, Seen>({ max: KNOWN_FILES });

  return {
    /** The rendition a request asks, worked out from what this process last read of the file. */
    guess(projectId: string, fileId: string, params: RenditionParams, accept?: string): Guess | undefined {
      const seen = seenFiles.get(`${projectId}/${fileId}`);
      return seen && { seen, target: targetOf(seen.file, params, accept) };
    },

    /**
     * The file and the rendition a request asks of it. With a guess, its key is looked up with the
     * file, in one statement; it holds when the file's content and type are still those it was worked
     * out from. Otherwise the key is worked out from the file and `stored` is left unknown. The caller
     * checks the file before serving anything.
     */
    async lookup(
      projectId: string,
      fileId: string,
      params: RenditionParams,
      accept: string | undefined,
      guessed: Guess | undefined,
    ) {
      const found = await repo.findFileAndRendition(
        db,
        projectId,
        fileId,
        guessed?.target.key,
        guessed?.seen.stored === undefined,
      );
      if (!found) return undefined;
      const { file, renditionSize, storedKeys } = found;
      const same = guessed && sameContent(guessed.seen.file, file);
      // What this process knows of the same content stays known (and one kept since this statement
      // read the list is not forgotten); the statement's list adds to it.
      const previous = seenFiles.get(`${projectId}/${fileId}`);
      const known = previous && sameContent(previous.file, file) ? previous.stored : undefined;
      const stored =
        storedKeys === undefined
          ? known
          : storedKeys.length >= repo.LISTED_RENDITIONS
            ? undefined
            : new Set([...(known ?? []), ...storedKeys]);
      if (same && renditionSize !== undefined) stored?.add(guessed.target.key);
      seenFiles.set(`${projectId}/${fileId}`, { file, stored });
      if (same) return { file, target: guessed.target, stored: { size: renditionSize } };
      return { file, target: targetOf(file, params, accept), stored: undefined };
    },

    /** Notes that the rendition `key` of `file` is stored now. */
    stored(file: Pick<files.FileRow, 'id' | 'project_id'>, key: string): void {
      seenFiles.get(`${file.project_id}/${file.id}`)?.stored?.add(key);
    },
  };
}

export type KnownFiles = ReturnType<typeof createKnownFiles>;
