import { forbidden, invalidState, notFound } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import { visibleFile } from '../../modules/files/service.ts';
import type { MultipartService } from '../../modules/uploads/multipart.ts';
import { letStalledPatchGo } from './lock.ts';
import { uploadGone, uploadLocked } from './protocol.ts';
import { findUploadWithSession, type TusUploadRow } from './upload-repo.ts';

/** Where an upload stands, as HEAD and PATCH answer it. */
export interface UploadState {
  id: string;
  fileId: string;
  offset: number;
  /** Null while deferred. */
  length: number | null;
  metadata: string | null;
  /** When an unfinished upload expires without progress. */
  expiresAt?: Date;
}

/** Who may continue an upload: the credential that created it, or an upload token of the same owner. */
export const creatorOf = (caller: Caller) => {
  const { principal } = caller;
  if (principal.kind === 'api_key') return principal.keyId;
  if (principal.kind === 'upload_token') return principal.tokenId;
  throw forbidden('tus uploads are made with an API key or an upload token');
};

/**
 * The caller's uploads as HEAD, PATCH and DELETE find them: loaded with their session and file,
 * their state, and whether they may still take bytes.
 */
export function createUploadLookup(deps: { db: Db; multipart: MultipartService }) {
  const { db, multipart } = deps;

  /** The caller's upload with its session and file; 404 for one of another credential. */
  async function load(caller: Caller, id: string) {
    const found = await findUploadWithSession(db, caller.project.id, id);
    if (!found) throw notFound('Upload');
    const { upload, file } = found;
    const creator = creatorOf(caller);
    if (upload.session_id === null) {
      // Written at once: the file's own check lets an upload token of the same owner in.
      if (upload.created_by !== creator) {
        if (caller.principal.kind !== 'upload_token') throw notFound('Upload');
        visibleFile(caller, file, { ofSameOwner: true });
      }
      return { upload, session: undefined, file };
    }
    // The session's own check lets an upload token of the same owner in, and nothing else of a token.
    const session = multipart.visibleSession(caller, found.session && { session: found.session, file });
    if (caller.principal.kind === 'api_key' && upload.created_by !== creator) throw notFound('Upload');
    return { upload, session, file: session.file };
  }

  const stateOf = (upload: TusUploadRow, offset: number, expiresAt?: Date): UploadState => ({
    id: upload.id,
    fileId: upload.file_id,
    offset,
    length: upload.upload_length,
    metadata: upload.metadata,
    expiresAt,
  });

  /** A finished upload's offset and length: its file's, whatever its last PATCH could record. */
  const finishedState = (upload: TusUploadRow, file: Awaited<ReturnType<typeof load>>['file']) => {
    const length = upload.upload_length ?? file?.size_bytes ?? upload.upload_offset;
    return stateOf({ ...upload, upload_length: length }, length);
  };

  /** Whether the upload may still take bytes: 410 once terminated or expired, 423 while it completes. */
  function requireOpen(session: Awaited<ReturnType<typeof load>>['session']) {
    if (!session) throw invalidState('The upload is complete', { status: 'completed' });
    if (session.status === 'aborted' || session.status === 'expired') throw uploadGone(session.status);
    // Clients retry a 423; they drop an upload whose PATCH or HEAD gets another 4xx.
    if (session.status === 'completing') throw uploadLocked();
    if (session.status !== 'open')
      throw invalidState(`The upload is ${session.status}`, { status: session.status });
    return session;
  }

  /**
   * HEAD: the offset. A stalled PATCH of the upload lets go first, its bytes stored, so that it stands:
   * the upload is then read again, as that left it (its bytes may have completed it, or a DELETE
   * ended it meanwhile). A finished upload's offset and length are its file's, whatever its last PATCH
   * could record. One being completed answers the offset recorded before its last PATCH: the
   * completion may still fail, and a client told the whole length would take the upload for done.
   */
  async function head(caller: Caller, id: string, settled = false): Promise<UploadState> {
    const { upload, session, file } = await load(caller, id);
    if (!session || session.status === 'completed') return finishedState(upload, file);
    if (session.status === 'completing') return stateOf(upload, upload.upload_offset);
    requireOpen(session);
    if (!settled && (await letStalledPatchGo(db, id))) return head(caller, id, true);
    return stateOf(upload, upload.upload_offset, session.session.expires_at);
  }

  return { load, stateOf, finishedState, requireOpen, head };
}

export type UploadLookup = ReturnType<typeof createUploadLookup>;
