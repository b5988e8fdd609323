import { invalidState, notFound } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import type * as files from '../files/repo.ts';
import { visibleFile } from '../files/service.ts';
import { findContent } from '../ingest/content-repo.ts';
import { findSessionAndFile, type SessionAndFile, type SessionRow } from './session-repo.ts';

/**
 * A multipart session as its caller reaches it: loaded with its file (404 for one the caller may not
 * see), its status as of now, and whether it is still open.
 */
export function createSessionAccess(db: Db) {
  /** A session's status as of now: one open past its expiry is expired even before the reaper ran. */
  const statusOf = (session: SessionRow) =>
    session.status === 'open' && session.expires_at <= new Date() ? 'expired' : session.status;

  /**
   * The caller's open-or-not session and its file; 404 when unknown, of another project, or of a
   * token of another owner (a replacement token of the same owner may continue it, as the contract says).
   * With `key` (S3, which names an upload by its key and its id), also 404 for an upload of a file
   * at another key.
   */
  async function load(caller: Caller, uploadId: string, key?: string) {
    const found = await findSessionAndFile(db, caller.project.id, uploadId);
    if (key !== undefined && found?.key !== key) throw notFound('Multipart upload');
    return visible(caller, found);
  }

  /** load's checks of a session and its file as read (by findSessionAndFile, or with its columns). */
  function visible(caller: Caller, found: SessionAndFile | undefined) {
    if (!found) throw notFound('Multipart upload');
    const file = visibleFile(caller, found.file, { ofSameOwner: true });
    return { session: found.session, file };
  }

  /** The type the upload's bytes declare: its new content's, or its file's. */
  async function typeOf(session: SessionRow, file: files.FileRow): Promise<string> {
    if (session.content_id === null) return file.content_type;
    return (await findContent(db, file.id, session.content_id))?.content_type ?? file.content_type;
  }

  /** Only an open session takes parts or completes; one past its expiry is expired even before the reaper ran. */
  function requireOpen(session: SessionRow): void {
    const status = statusOf(session);
    if (status !== 'open') throw invalidState(`The multipart upload is ${status}`, { status });
  }

  return { statusOf, load, visible, typeOf, requireOpen };
}

export type SessionAccess = ReturnType<typeof createSessionAccess>;
