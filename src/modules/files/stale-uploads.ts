import type { Queryable } from '../../infra/db.ts';
import type { ObjectStore } from '../../infra/storage/object-store.ts';
import { isContentUploadingTo } from '../ingest/content-repo.ts';
import { findProject } from '../projects/repo.ts';
import { isUploadingTo } from './collector-repo.ts';

/** The project id of a key Coffer made (`<project_id>/<file_id>/<id>`); undefined for any other key. */
const PROJECT_OF_KEY = /^(proj_[A-Za-z0-9]+)\/file_[A-Za-z0-9]+\/[A-Za-z0-9_-]+$/;

/**
 * Whether the unfinished upload of `key` must stay: its file or new content is still `uploading`
 * (an open or completing multipart session, an upload URL not confirmed yet or held by a legal
 * hold), or it is not this database's to judge (a key of another project, another deployment's or
 * another application's in a shared bucket).
 */
export async function uploadStillOwned(db: Queryable, key: string): Promise<boolean> {
  const projectId = PROJECT_OF_KEY.exec(key)?.[1];
  if (!projectId) return true;
  if (!(await findProject(db, projectId))) return true;
  return (await isUploadingTo(db, key)) || (await isContentUploadingTo(db, key));
}

/**
 * Removes the bytes of uploads that no process owns any more (a crash mid-PUT or mid-part, an upload
 * started in the store whose record was never written). Only what is older than an upload URL's
 * lifetime plus the grace period: a live upload writes into its temp file more often than that, and
 * a store upload is recorded within moments of its start.
 */
export function removeStaleUploads(
  db: Queryable,
  store: ObjectStore,
  staleAfterSeconds: number,
): Promise<number> {
  const olderThan = new Date(Date.now() - staleAfterSeconds * 1000);
  return store.removeStale(olderThan, (key) => uploadStillOwned(db, key));
}
