import { invalidState, notFound } from '../../domain/errors.ts';
import type { Queryable } from '../../infra/db.ts';
import { enqueueJob } from '../../infra/jobs/index.ts';
import { recordEvent } from '../events/repo.ts';
import * as files from '../files/repo.ts';
import { categoryOf } from '../files/rules.ts';
import type { Project } from '../projects/schemas.ts';
import { queueThumbnails } from '../renditions/thumbnails.ts';
import { enforceQuotas } from '../usage/service.ts';
import { hasVersions, recordVersion, type Snapshot } from '../versions/repo.ts';
import {
  hasNewerCommitted,
  insertContent,
  type PendingContent,
  settleContentSize,
  transitionContent,
} from './content-repo.ts';
import type { Sealed } from './intake.ts';

/**
 * How new content of a file commits, in the caller's transaction: over the file locked, at once or
 * once scanned, unless a newer write to the file committed first (then it is not kept).
 */

/** New content of a file as an upload plans it, before its bytes are stored. */
export interface NewContent {
  id: string;
  storageKey: string;
  size: number;
  contentType: string;
  expiresAt: Date;
  /** When given, the file's metadata once the content is current. */
  metadata?: Record<string, unknown>;
  httpHeaders?: files.HttpHeaders;
  checksum?: files.ContentChecksum;
}

/** Records `content` of the file `fileId` (uploading). */
export function recordNewContent(q: Queryable, projectId: string, fileId: string, content: NewContent) {
  return insertContent(q, {
    id: content.id,
    project_id: projectId,
    file_id: fileId,
    storage_key: content.storageKey,
    size_bytes: content.size,
    content_type: content.contentType,
    upload_expires_at: content.expiresAt,
    metadata: content.metadata,
    http_headers: content.httpHeaders,
    client_checksum: content.checksum,
  });
}

/** Holds recorded new content of `bytes` to the project's quota (its file is counted already). */
export const admitBytes = (q: Queryable, project: Project, bytes: number) =>
  enforceQuotas(q, project, { bytes, files: 0 });

/** Why new content that a newer write to its file overtook failed. */
const SUPERSEDED = 'superseded';

/**
 * New content, committed at once (no scan), waiting for its scan, or not kept: a newer write to the
 * file was committed first (S3's last writer wins; the REST confirm refuses it).
 */
export interface ContentOutcome {
  version_id: string;
  status: 'processing' | 'committed' | 'superseded';
  /** The file: with its content before while the new content waits for its scan, or was superseded. */
  file: files.FileRow;
  /** The ETag of the new content's bytes. */
  etag: string;
}

/** Makes `snapshot` the file's current content; its metadata, status and folder are untouched. */
export async function replaceContent(
  q: Queryable,
  file: files.FileRow,
  snapshot: Snapshot & { etag: string | null },
  metadata?: Record<string, unknown>,
): Promise<files.FileRow> {
  const updated = await files.updateFile(q, file.project_id, file.id, {
    metadata,
    storage_key: snapshot.storage_key,
    size_bytes: snapshot.size_bytes,
    content_type: snapshot.content_type,
    // The content's own headers and checksum, none when it has none: they describe its bytes, not the file.
    http_headers: snapshot.http_headers ?? null,
    client_checksum: snapshot.client_checksum ?? null,
    category: categoryOf(snapshot.content_type),
    checksum_sha256: snapshot.checksum_sha256,
    etag: snapshot.etag,
  });
  return updated!;
}

/**
 * Makes committed new content the current content of `file` (locked, and no newer content of it
 * committed), with its file.ready event: a version (its id is the content's) where the project
 * keeps versions or the file has some already (a file whose earlier content predates versioning
 * gets that content recorded first, so it can be restored); otherwise the earlier content is
 * retired, and collected after the grace period.
 */
async function makeCurrent(
  q: Queryable,
  project: Project,
  file: files.FileRow,
  content: PendingContent,
): Promise<files.FileRow> {
  const versioned = await hasVersions(q, file.id);
  if (project.settings.versioning_enabled || versioned) {
    if (!versioned) await recordVersion(q, file, file, 'upload');
    await recordVersion(q, file, content, 'upload', { id: content.id });
  } else {
    // Replaced, not kept (an S3 PUT over a key where versioning is off): the old bytes are collected.
    await files.retireObject(q, file.project_id, file.storage_key);
  }
  const updated = await replaceContent(q, file, content, content.metadata ?? undefined);
  await recordEvent(q, project, 'file.ready', updated);
  await queueThumbnails(q, project, updated);
  return updated;
}

/**
 * The file new content commits over, locked (a delete, or another content's commit, waits); `gone`:
 * the refusal when it is deleted.
 */
export async function lockFile(
  q: Queryable,
  projectId: string,
  fileId: string,
  gone = () => notFound('File'),
): Promise<files.FileRow> {
  const file = await files.findFile(q, projectId, fileId, true);
  if (!file || file.deleted_at !== null) throw gone();
  return file;
}

/**
 * Gives the file new content was committed to `tags`, the file's tags as a write at its key names them,
 * unless a newer write overtook that write (it is not kept); none given: the file keeps its own.
 */
export async function tagWrittenFile(
  q: Queryable,
  outcome: ContentOutcome,
  tags: string[] | undefined,
): Promise<ContentOutcome> {
  if (tags === undefined || outcome.status === 'superseded') return outcome;
  const file = await files.updateFile(q, outcome.file.project_id, outcome.file.id, { tags });
  return { ...outcome, file: file! };
}

/**
 * Content whose scan passed (`processing`) becomes the current content of `file` (locked, not
 * deleted), unless a newer write to the file was committed first (contents of a file are scanned at
 * once, in any order): then it fails (`superseded`) and its bytes are collected, as at a confirm it
 * overtook. Answers the file, or undefined when the content had left `processing` already.
 */
export async function commitScannedContent(
  q: Queryable,
  project: Project,
  file: files.FileRow,
  content: PendingContent,
): Promise<files.FileRow | undefined> {
  const overtaken = await hasNewerCommitted(q, file.id, content.id);
  const settled = await transitionContent(
    q,
    content.id,
    'processing',
    overtaken ? 'failed' : 'committed',
    overtaken ? { failure_reason: SUPERSEDED } : {},
  );
  if (!settled) return undefined;
  return overtaken ? file : makeCurrent(q, project, file, settled);
}

/**
 * Commits new content of `file` (locked) whose bytes are sealed: at once, or once its scan finds it
 * clean. Content a newer write to the file overtook (committed first) would never become current:
 * it fails (`superseded`), its bytes collected as rejected content's are. `admit` runs first for
 * content that is kept.
 */
export async function commitNewContent(
  q: Queryable,
  project: Project,
  file: files.FileRow,
  contentId: string,
  sealed: Sealed,
  admit?: () => Promise<void>,
): Promise<ContentOutcome> {
  const scan = project.settings.virus_scan_enabled;
  const checksum = sealed.sha256 ?? null;
  const overtaken = await hasNewerCommitted(q, file.id, contentId);
  if (!overtaken) await admit?.();
  // Leaves `uploading` in this statement, so that a concurrent second confirm finds nothing to claim.
  const claimed = await transitionContent(
    q,
    contentId,
    'uploading',
    overtaken ? 'failed' : scan ? 'processing' : 'committed',
    { checksum_sha256: checksum, etag: sealed.etag, failure_reason: overtaken ? SUPERSEDED : undefined },
  );
  if (!claimed) throw invalidState('The upload is no longer uploading');
  if (overtaken) return { version_id: contentId, status: 'superseded', file, etag: sealed.etag };
  if (scan) {
    await enqueueJob(q, 'scan', project.id, file.id, contentId);
    return { version_id: contentId, status: 'processing', file, etag: sealed.etag };
  }
  const updated = await makeCurrent(q, project, file, claimed);
  if (checksum === null) await enqueueJob(q, 'digest', project.id, file.id, contentId, claimed.storage_key);
  return { version_id: contentId, status: 'committed', file: updated, etag: sealed.etag };
}

/**
 * Bytes a write stored (`sealed`, with the checksum their client sent, if any) recorded as new
 * content of `locked` and committed (see commitNewContent), in the caller's transaction: a write at
 * the key of a file (claimKey), or a multipart upload merged into it. The file is locked first,
 * as every commit of new content locks it: recording the content takes a key share of the file row,
 * and a second write holding one too would wait for this one's lock while this one waits for its (a
 * deadlock); the quota lock then comes after it too.
 */
export async function commitStoredContent(
  q: Queryable,
  project: Project,
  locked: files.FileRow,
  content: NewContent,
  sealed: Sealed,
): Promise<ContentOutcome> {
  await recordNewContent(q, project.id, locked.id, { ...content, checksum: sealed.checksum });
  // A write a newer one overtook is not kept, so it is not held to the quota either.
  return commitNewContent(q, project, locked, content.id, sealed, () => admitBytes(q, project, content.size));
}

/**
 * New content uploaded in parts is complete (commitFile's counterpart for a multipart upload over a
 * file): its size, learned now, counts against the quota now (unless a newer write overtook it), and
 * it commits as a PUT's would.
 */
export async function commitContentParts(
  q: Queryable,
  project: Project,
  fileId: string,
  contentId: string,
  sealed: Sealed & { size: number },
): Promise<ContentOutcome> {
  // Deleted while its parts were uploaded: the upload is what is refused (its session then ends aborted).
  const file = await lockFile(q, project.id, fileId, () => invalidState('The file is no longer there'));
  await settleContentSize(q, contentId, sealed.size);
  // Content a newer write overtook is not kept: no quota holds its complete back.
  return commitNewContent(q, project, file, contentId, sealed, () => admitBytes(q, project, sealed.size));
}

/** New content given up before it was complete (its multipart upload aborted or expired). */
export async function failContent(q: Queryable, contentId: string, reason: string): Promise<void> {
  await transitionContent(q, contentId, 'uploading', 'failed', { failure_reason: reason });
}
