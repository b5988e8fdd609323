import type { Readable } from 'node:stream';
import type { Config } from '../../config.ts';
import { invalidState, partsTooLarge, validationError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db } from '../../infra/db.ts';
import {
  MAX_PART_NUMBER,
  type ObjectStore,
  STORED_PER_DECLARED_BYTE,
} from '../../infra/storage/object-store.ts';
import { urlLifetimeSeconds } from '../files/service.ts';
import type { TypeField } from '../ingest/rules.ts';
import type { IngestService } from '../ingest/service.ts';
import type { SessionAccess } from './session-access.ts';
import { grantOpenPart, lockGrants, recordGrant, type SessionRow } from './session-repo.ts';

function checkPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
    throw validationError(`part must run from 1 to ${MAX_PART_NUMBER}`, { field: 'part' });
  }
}

/**
 * The parts of an open multipart upload: each granted within what its session may hold in the store,
 * then written, staged, or sent by the client to a presigned URL.
 */
export function createMultipartParts(deps: {
  config: Config;
  db: Db;
  store: ObjectStore;
  ingest: IngestService;
  access: SessionAccess;
}) {
  const { config, db, store, ingest, access } = deps;
  const { load, typeOf, requireOpen } = access;

  /**
   * Records that part `partNumber` may be sent with `size` bytes. A part number's URLs can store at
   * most its largest grant, so the grants bound what the session can ever hold in the store: no
   * more than twice its total (room for parts cut again), checked one grant at a time per session.
   */
  async function grant(session: SessionRow, partNumber: number, size: number): Promise<void> {
    if (size > session.total_size_bytes) {
      throw validationError(`A part cannot hold more than the upload's ${session.total_size_bytes} bytes`, {
        field: 'size',
        total_size_bytes: session.total_size_bytes,
      });
    }
    await db.tx(async (q) => {
      const { grants, open } = await lockGrants(q, session.id);
      // Read open before the lock: an abort, a complete or the expiry may have come between.
      if (!open) throw invalidState('The multipart upload is no longer open');
      if (size <= (grants[partNumber] ?? 0)) return;
      let others = 0;
      for (const [number, bytes] of Object.entries(grants))
        if (Number(number) !== partNumber) others += bytes;
      const limit = STORED_PER_DECLARED_BYTE * session.total_size_bytes;
      if (others + size > limit) {
        throw partsTooLarge(others + size, session.total_size_bytes, limit, others);
      }
      await recordGrant(q, session.id, partNumber, size);
    });
  }

  /**
   * grant for a part about to be stored, the usual case in one statement (no transaction holding the
   * session's row while parts of the same upload wait for it); a refusal is told by reading the
   * session again and granting as grant does.
   */
  async function grantPart(caller: Caller, session: SessionRow, partNumber: number, size: number) {
    if (await grantOpenPart(db, session.id, partNumber, size, STORED_PER_DECLARED_BYTE)) return;
    const { session: current } = await load(caller, session.id);
    requireOpen(current);
    await grant(current, partNumber, size);
  }

  return {
    /**
     * Writes part `partNumber` of an open upload from a stream of exactly `size` bytes; answers its ETag
     * (with `md5: false`, what names the part for finish, maybe not its MD5: see ObjectStore.writePart).
     */
    async writePart(
      caller: Caller,
      uploadId: string,
      partNumber: number,
      body: Readable,
      size: number,
      options?: { md5?: boolean; key?: string; typeField?: TypeField },
    ) {
      const { session, file } = await load(caller, uploadId, options?.key);
      requireOpen(session);
      checkPartNumber(partNumber);
      await grantPart(caller, session, partNumber, size);
      // The first part holds the file's head: checked against its type like a single upload's.
      const bytes =
        partNumber === 1
          ? await ingest.screen(caller, await typeOf(session, file), file.filename, body, options?.typeField)
          : body;
      return store.writePart(session.storage_key, session.store_upload_id, partNumber, bytes, size, options);
    },

    /**
     * Starts receiving a part of `session`'s upload (of exactly `size` bytes) before its number is
     * known; `place` then checks that the session is still open and grants the part as writePart does
     * (the session and its file were loaded by the caller), and stores it (a failed check drops the
     * bytes). Not for a first part, whose head writePart checks against the file's type.
     */
    stagePart(session: SessionRow, body: Readable, size: number, options?: { md5?: boolean }) {
      const staged = store.stagePart(session.storage_key, session.store_upload_id, body, size, options);
      return {
        async place(caller: Caller, partNumber: number): Promise<string> {
          try {
            if (partNumber === 1) throw new Error('A first part is written by writePart');
            checkPartNumber(partNumber);
            await grantPart(caller, session, partNumber, size);
          } catch (error) {
            await staged.discard();
            throw error;
          }
          return staged.place(partNumber);
        },
        discard: () => staged.discard(),
      };
    },

    /**
     * A presigned PUT URL for one part; the caller's TTL unless the project requires signed URL
     * lifetimes. With `size`, the URL takes exactly that many bytes (required where the store signs sizes).
     */
    async partUrl(
      caller: Caller,
      uploadId: string,
      partNumber: number,
      ttl: number | undefined,
      size?: number,
    ) {
      const { session } = await load(caller, uploadId);
      requireOpen(session);
      checkPartNumber(partNumber);
      if (size === undefined && store.capabilities.partSizeRequired) {
        throw validationError('size is required: part URLs are signed for the exact size of the part', {
          field: 'size',
        });
      }
      if (size !== undefined) await grant(session, partNumber, size);
      const seconds = urlLifetimeSeconds(caller.project, ttl, config.uploadUrlTtlSeconds);
      const expiresAt = new Date(Date.now() + seconds * 1000);
      const url = await store.presignPart(session.storage_key, session.store_upload_id, partNumber, {
        expiresAt,
        size,
      });
      return { upload_id: session.id, part_number: partNumber, url, expires_at: expiresAt.toISOString() };
    },
  };
}
