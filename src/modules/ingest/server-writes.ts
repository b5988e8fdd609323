import type { Readable } from 'node:stream';
import type { Caller } from '../../domain/principal.ts';
import type { Queryable } from '../../infra/db.ts';
import { idBeside } from '../../lib/ids.ts';
import * as files from '../files/repo.ts';
import type { UploadTokenRow } from '../uploads/token-repo.ts';
import { type ContentOutcome, commitStoredContent, tagWrittenFile } from './content-commit.ts';
import type {
  IngestDeps,
  Intake,
  PlannedObject,
  Sealed,
  UploadRequest,
  WriteGuard,
  WrittenBody,
} from './intake.ts';
import { claimKey } from './key-claim.ts';
import { checkSingleUploadSize, type TypeField, withTokenTags } from './rules.ts';
import { restrictsTypes, screenHead } from './sniff.ts';

/**
 * What a write at an S3 key made (see writeAtKey): a new file; new content of the file there; or
 * nothing, a newer write having taken the key first.
 */
export type KeyWrite =
  | { kind: 'file'; file: files.FileRow }
  | { kind: 'content'; outcome: ContentOutcome }
  | { kind: 'overtaken'; etag: string };

/** What the upload core's server-side writes take from it: a new file's plan, its rules, its record. */
export interface NewFileSteps {
  plan(caller: Caller, request: UploadRequest, expiresAt: Date | undefined): PlannedObject;
  admit(
    q: Queryable,
    caller: Caller,
    request: UploadRequest,
    planned: PlannedObject,
  ): Promise<{ token: UploadTokenRow | undefined }>;
  recordFile(
    q: Queryable,
    caller: Caller,
    request: UploadRequest,
    planned: PlannedObject,
    sealed?: Sealed,
  ): Promise<files.FileRow>;
}

/**
 * The upload core's server-side ways in: bytes a request carries (an S3 PutObject, a tus creation with
 * its upload), checked and stored by the server itself, then recorded in one transaction.
 */
export function createServerWrites(deps: IngestDeps, intake: Intake, steps: NewFileSteps) {
  const { db, store, metrics } = deps;
  const { tokenOf, keepingOnCommit } = intake;
  const { plan, admit, recordFile } = steps;

  /**
   * The first half of a server-side write of a new file: its rules checked, then `body` stored (the
   * file's planned object, sealed). Answers the plan, the caller's upload token and the sealed bytes.
   */
  async function storeNewFile(caller: Caller, request: UploadRequest, body: WrittenBody) {
    checkSingleUploadSize(request.size_bytes);
    const planned = plan(caller, request, undefined);
    const { token } = await admit(db, caller, request, planned);
    const bytes = restrictsTypes(caller.project, token)
      ? await screenHead(body, planned.contentType, request.filename, request.type_field)
      : body;
    const object = await store.write(planned.storageKey, bytes, {
      size: request.size_bytes,
      contentType: planned.contentType,
    });
    // Read to its end now: a checksum its client sent is verified.
    return { planned, token, sealed: { ...object, checksum: body.checksum } };
  }

  /** A new file written in one request: its upload initiated and completed at once. */
  function countWrittenFile(): void {
    metrics?.uploads.inc({ outcome: 'initiated' });
    metrics?.uploads.inc({ outcome: 'completed' });
  }

  return {
    /**
     * The server-side way in: `body` (exactly `request.size_bytes` bytes) becomes a new file in one
     * request. The rules are checked before a byte is stored; the file is recorded and committed in
     * one transaction once the object is sealed, and the object is removed when that transaction fails.
     * `guard` runs first in that transaction; `record` adds an adapter's own record of the upload to it.
     * A checksum the body verified is kept with the file's content.
     */
    async writeFile(
      caller: Caller,
      request: UploadRequest,
      body: WrittenBody,
      hooks: { guard?: WriteGuard; record?: (q: Queryable, file: files.FileRow) => Promise<void> } = {},
    ): Promise<files.FileRow> {
      const { planned, sealed } = await storeNewFile(caller, request, body);
      const file = await keepingOnCommit(planned.storageKey, () =>
        db.tx(async (q) => {
          await hooks.guard?.(q);
          const committed = await recordFile(q, caller, request, planned, sealed);
          await hooks.record?.(q, committed);
          return committed;
        }),
      );
      countWrittenFile();
      return file;
    },

    /**
     * writeFile at a key that shows one file (an S3 key), where what the write makes is decided as it
     * commits: `holder` answers, with the key held until the transaction ends, the file the caller
     * sees there now, which claimKey weighs. Overtaken by a newer write: not kept, its bytes retired.
     * Into an older ready file: the bytes become its new content (a new version where the project
     * keeps them), in this write's place in time, and the request's `tags`, when given, become its
     * tags. Otherwise the bytes are a new file.
     */
    async writeAtKey(
      caller: Caller,
      request: UploadRequest,
      body: WrittenBody,
      hooks: { guard?: WriteGuard; holder: (q: Queryable) => Promise<files.FileRow | undefined> },
    ): Promise<KeyWrite> {
      const { planned, token, sealed } = await storeNewFile(caller, request, body);
      const written = await keepingOnCommit(planned.storageKey, () =>
        db.tx(async (q): Promise<KeyWrite> => {
          await hooks.guard?.(q);
          const claim = await claimKey(q, caller.project, await hooks.holder(q), planned.fileId);
          // Overtaken, its bytes are retired with the transaction, to be collected, as no record holds them.
          if (claim.kind === 'overtaken') {
            await files.retireObject(q, caller.project.id, planned.storageKey);
            return { kind: 'overtaken', etag: sealed.etag };
          }
          if (claim.kind === 'into') {
            // Planned as a new file's, checked as one: as on any write, the token's metadata wins.
            const content = {
              ...planned,
              id: idBeside('ver', planned.fileId),
              metadata: request.metadata && { ...request.metadata, ...token?.metadata },
              httpHeaders: request.http_headers,
            };
            const outcome = await commitStoredContent(q, caller.project, claim.file, content, sealed);
            // Tags are the file's: those the write names replace its own (an upload token's merged in,
            // as on any of its uploads), with its content.
            const tags = request.tags && withTokenTags(request.tags, token);
            return { kind: 'content', outcome: await tagWrittenFile(q, outcome, tags) };
          }
          return { kind: 'file', file: await recordFile(q, caller, request, planned, sealed) };
        }),
      );
      if (written.kind === 'file') countWrittenFile();
      return written;
    },

    /**
     * The head of a stream the server receives itself, checked against the declared type where the
     * caller's token or project limits types (see `screenHead`); the stream as it was otherwise.
     */
    async screen(
      caller: Caller,
      contentType: string,
      filename: string,
      body: Readable,
      typeField?: TypeField,
    ): Promise<Readable> {
      return restrictsTypes(caller.project, await tokenOf(db, caller))
        ? screenHead(body, contentType, filename, typeField)
        : body;
    },
  };
}
