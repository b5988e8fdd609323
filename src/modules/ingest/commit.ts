import { invalidState } from '../../domain/errors.ts';
import type { Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import { recordEvent } from '../events/repo.ts';
import * as files from '../files/repo.ts';
import type { Project } from '../projects/schemas.ts';
import { queueThumbnails } from '../renditions/thumbnails.ts';
import { enforceQuotas } from '../usage/service.ts';
import { recordVersion } from '../versions/repo.ts';
import type { Sealed } from './intake.ts';

/**
 * The bytes of an `uploading` file are complete: it becomes `processing` (a scan job queued) when
 * the project scans, else `ready` (event file.ready); with versioning on, the content is recorded
 * as a version. A checksum the store did not compute is left to the scan, or to a digest job.
 * Only from `uploading`: a second call is 409. `deferredSize` is the size of an upload declared
 * without one (an S3 multipart upload is declared with 0 bytes, held to `sizeLimit` part by part):
 * recorded now, and counted against the quota now.
 */
export async function commitFile(
  q: Queryable,
  project: Project,
  fileId: string,
  sealed: Sealed,
  deferredSize?: number,
): Promise<files.FileRow> {
  const scan = project.settings.virus_scan_enabled;
  const checksum = sealed.sha256 ?? null;
  const file = await files.transitionFile(q, project.id, fileId, 'uploading', scan ? 'processing' : 'ready', {
    checksum_sha256: checksum ?? undefined,
    etag: sealed.etag,
    upload_expires_at: null,
    size_bytes: deferredSize,
  });
  if (!file) throw invalidState('The file is no longer uploading');
  // A size learned only now counts against the quota now, in the transaction that records it.
  if (deferredSize !== undefined) await enforceQuotas(q, project, { bytes: deferredSize, files: 0 });
  if (!scan) await recordEvent(q, project, 'file.ready', file);
  await followCommit(q, project, file);
  return file;
}

/**
 * What follows a file's bytes being committed, in the same transaction: its version where the
 * project keeps versions, then its scan, or (ready) its thumbnails and, when the store did not hash
 * the bytes, its digest.
 */
export async function followCommit(q: Queryable, project: Project, file: files.FileRow): Promise<void> {
  if (project.settings.versioning_enabled) await recordVersion(q, file, file, 'upload');
  if (project.settings.virus_scan_enabled) await enqueueJob(q, 'scan', project.id, file.id);
  else {
    await queueThumbnails(q, project, file);
    if (file.checksum_sha256 === null) {
      await enqueueJob(q, 'digest', project.id, file.id, null, file.storage_key);
    }
  }
}
