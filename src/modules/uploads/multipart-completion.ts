import { fileTooLarge, invalidState, validationError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import {
  isStoreError,
  MIN_PART_SIZE,
  type ObjectStore,
  type PartInfo,
} from '../../infra/storage/object-store.ts';
import { bareEtag } from '../../lib/etag.ts';
import { failpoint } from '../../lib/failpoints.ts';
import * as files from '../files/repo.ts';
import { visibleAt } from '../files/service.ts';
import type { WriteGuard } from '../ingest/intake.ts';
import type { SessionAccess } from './session-access.ts';
import { claimCompleting } from './session-repo.ts';
import type { SessionLifecycle } from './sessions.ts';

/** Checks the client's part list against what the store holds; every failure names the part. */
export function checkParts(
  listed: { part_number: number; etag: string }[],
  stored: PartInfo[],
  expected: number | { atMost: number },
): void {
  if (listed.length === 0) throw validationError('parts must list at least one part', { field: 'parts' });
  // The whole list's order first, as S3 checks it: a list out of order is refused as such, whatever its parts.
  listed.forEach((part, index) => {
    const previous = listed[index - 1];
    if (previous && part.part_number <= previous.part_number) {
      throw validationError(
        `Part ${part.part_number} is out of order or repeated: list parts ascending and unique`,
        {
          field: `parts.${index}`,
          part_number: part.part_number,
          previous_part_number: previous.part_number,
        },
      );
    }
  });
  const byNumber = new Map(stored.map((part) => [part.partNumber, part]));
  let total = 0;
  listed.forEach((part, index) => {
    const field = `parts.${index}`;
    const found = byNumber.get(part.part_number);
    if (!found) {
      throw validationError(`Part ${part.part_number} was not uploaded`, {
        field,
        part_number: part.part_number,
      });
    }
    if (bareEtag(found.etag) !== bareEtag(part.etag)) {
      throw validationError(`The ETag of part ${part.part_number} does not match the uploaded part`, {
        field,
        part_number: part.part_number,
      });
    }
    if (index < listed.length - 1 && found.size < MIN_PART_SIZE) {
      throw validationError(`Part ${part.part_number} is smaller than 5 MiB and is not the last part`, {
        field,
        part_number: part.part_number,
        size_bytes: found.size,
        min_size_bytes: MIN_PART_SIZE,
      });
    }
    total += found.size;
  });
  if (typeof expected === 'object') {
    if (total > expected.atMost) throw fileTooLarge(expected.atMost, 'project', 'parts');
    return;
  }
  if (total !== expected) {
    throw validationError(`The parts hold ${total} bytes, not the declared total_size_bytes ${expected}`, {
      field: 'parts',
      parts_size_bytes: total,
      total_size_bytes: expected,
    });
  }
}

/**
 * How a multipart upload ends for its caller: described while its parts arrive, completed into its
 * file (its parts checked, its object assembled, the file settled), or aborted.
 */
export function createMultipartCompletion(deps: {
  db: Db;
  store: ObjectStore;
  sessions: SessionLifecycle;
  access: SessionAccess;
}) {
  const { db, store, sessions, access } = deps;
  const { load, requireOpen, statusOf } = access;

  return {
    /** What is uploaded so far, so a client that crashed sends only the missing parts (`key`: see load). */
    async describe(caller: Caller, uploadId: string, key?: string) {
      const { session } = await load(caller, uploadId, key);
      const parts =
        session.status === 'open' ? await store.listParts(session.storage_key, session.store_upload_id) : [];
      return {
        upload_id: session.id,
        file_id: session.file_id,
        status: session.status,
        total_size_bytes: session.total_size_bytes,
        expires_at: session.expires_at.toISOString(),
        parts: parts.map((part) => ({
          part_number: part.partNumber,
          etag: part.etag,
          size_bytes: part.size,
        })),
      };
    },

    /** Validates the parts, assembles the object, then finishes the file exactly as confirm does. */
    async complete(caller: Caller, uploadId: string, parts: { part_number: number; etag: string }[]) {
      return files.toFileObject((await this.finish(caller, uploadId, parts)).file);
    },

    /**
     * complete, answering the file as recorded (its ETag too, for S3's answer) and the new content
     * the upload made of it, if any (`contentId`, its version's id, unless `superseded`: not kept, a
     * newer write having committed first, or, with `key`, a newer file showing at the key of the new
     * file it made; with `key` too, the new content of an older file recorded at the key since, see
     * sessions' settle); `guard` runs first in the transaction that records it (a refusal ends the
     * upload, its object collected); `key`: see load.
     */
    async finish(
      caller: Caller,
      uploadId: string,
      parts: { part_number: number; etag: string }[],
      { guard, key }: { guard?: WriteGuard; key?: string } = {},
    ): Promise<{ file: files.FileRow; contentId: string | null; superseded: boolean }> {
      const { session, file } = await load(caller, uploadId, key);
      requireOpen(session);
      if (session.content_id === null && file.status !== 'uploading') {
        throw invalidState(`The file is ${file.status}, not uploading`, { status: file.status });
      }
      const stored = await store.listParts(session.storage_key, session.store_upload_id).catch((error) => {
        // Aborted (or reaped) since it was loaded.
        if (isStoreError(error, 'NoSuchUpload')) throw invalidState('The multipart upload is no longer open');
        throw error;
      });
      checkParts(
        parts,
        stored,
        session.size_deferred ? { atMost: session.total_size_bytes } : session.total_size_bytes,
      );
      // Claims the session so that concurrent completes or aborts cannot interleave with assembly.
      if (!(await claimCompleting(db, session.id, guard !== undefined))) {
        throw invalidState('The multipart upload is already being completed or was aborted');
      }
      // With `key` (S3), a new file keeps its key to one file (see sessions' settle).
      const holder = key === undefined ? undefined : (q: Queryable) => visibleAt(q, caller, key);
      let object: Awaited<ReturnType<ObjectStore['completeMultipart']>>;
      const stopHolding = sessions.holdCompleting(session.id);
      try {
        object = await store.completeMultipart(
          session.storage_key,
          session.store_upload_id,
          parts.map((part) => ({ partNumber: part.part_number, etag: part.etag })),
        );
      } catch (error) {
        // The store may have assembled the object although the call failed (its answer was lost):
        // then the upload is done. When that cannot be told, the session stays completing for the
        // reaper to settle; only an object surely missing reopens it for another complete.
        const assembled = await store.head(session.storage_key).then(
          (info) => info ?? null,
          () => undefined,
        );
        if (assembled) return sessions.settle(session, caller.project, assembled, guard, holder);
        if (assembled === null) await sessions.reopen(session);
        throw error;
      } finally {
        stopHolding();
      }
      failpoint('multipart.complete.assembled');
      return sessions.settle(session, caller.project, object, guard, holder);
    },

    /**
     * Where an upload's completion stands, for a complete sent again: `completing`, or `completed`
     * with its file while the content it made is still the file's (its object the file's), else
     * undefined. `key`: see load.
     */
    async completion(caller: Caller, uploadId: string, key?: string) {
      const { session, file } = await load(caller, uploadId, key);
      const status = statusOf(session);
      if (status === 'completing') return { status } as const;
      if (status !== 'completed' || file.storage_key !== session.storage_key) return undefined;
      return { status, file, contentId: session.content_id } as const;
    },

    /** Aborts an open upload (`key`: see load). */
    async abort(caller: Caller, uploadId: string, key?: string): Promise<void> {
      const { session } = await load(caller, uploadId, key);
      requireOpen(session);
      if (!(await sessions.discard(session, 'aborted')))
        throw invalidState('The multipart upload is no longer open');
    },
  };
}
