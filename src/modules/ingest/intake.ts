import type { Readable } from 'node:stream';
import type { Config } from '../../config.ts';
import { tokenExpired, unauthenticated } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { ObjectInfo, ObjectStore } from '../../infra/storage/object-store.ts';
import type { ContentChecksum, HttpHeaders } from '../files/repo.ts';
import type { FolderService } from '../folders/service.ts';
import type { MetadataSchemaService } from '../metadata-schema/service.ts';
import { findToken, type UploadTokenRow } from '../uploads/token-repo.ts';
import type { SizeField, TypeField } from './rules.ts';

/** What the upload core is built from. */
export interface IngestDeps {
  config: Config;
  db: Db;
  store: ObjectStore;
  folders: FolderService;
  schemas: MetadataSchemaService;
  metrics?: Metrics;
}

/** What a client declares about a file it is about to upload, by whatever protocol. */
export interface UploadRequest {
  filename: string;
  content_type: string;
  size_bytes: number;
  /** The request field the size came in, for errors. */
  size_field?: SizeField;
  /** The request field the content type came in, for errors. */
  type_field?: TypeField;
  folder_id?: string | null;
  /**
   * Whether `folder_id` is where the file must go (an S3 key names its folder): an upload token bound
   * to another folder is then refused, where otherwise its folder simply applies.
   */
  exact_folder?: boolean;
  metadata?: Record<string, unknown>;
  /** Headers S3 stores with the content (see HttpHeaders). */
  http_headers?: HttpHeaders;
  tags?: string[];
}

/** The object a new upload will have: decided, and made in the store, before its file is recorded. */
export interface PlannedObject {
  projectId: string;
  fileId: string;
  /** Set when the object is new content of the file rather than its first. */
  contentId?: string;
  storageKey: string;
  contentType: string;
  size: number;
  expiresAt: Date;
}

/**
 * How the bytes of a declared upload will arrive (a presigned URL, a multipart upload): made in the
 * store before the file is recorded, so that no database connection waits on the store, and undone
 * when the file's transaction does not commit.
 */
export interface ByteSource<T, U = undefined> {
  make(planned: PlannedObject): Promise<T>;
  undo(made: T, planned: PlannedObject): Promise<void>;
  /** More work for the transaction that records the file or content (e.g. recording the multipart session). */
  record?: (q: Queryable, planned: PlannedObject, made: T) => Promise<U>;
}

/**
 * What the store answered for sealed bytes: their SHA-256 when it hashed them, and its ETag; with the
 * checksum their client sent, when a server-side write verified one (see WrittenBody).
 */
export type Sealed = Pick<ObjectInfo, 'sha256' | 'etag'> & { checksum?: ContentChecksum };

/**
 * The bytes of a server-side write. One that verified a checksum its client sent with them (an S3
 * write's x-amz-checksum-*) tells it once read to its end, and the content keeps it.
 */
export type WrittenBody = Readable & { readonly checksum?: ContentChecksum };

/**
 * A check a protocol runs first in the transaction that records a write (e.g. a condition on what the
 * write replaces): throwing refuses the write, its bytes removed.
 */
export type WriteGuard = (q: Queryable) => Promise<void>;

/**
 * What every upload shares, of a new file or of new content: the caller's upload token, and bytes
 * put in the store before the upload is recorded, removed again when the record does not commit.
 */
export function createIntake(deps: IngestDeps) {
  const { db, store, metrics } = deps;

  async function tokenOf(q: Queryable, caller: Caller): Promise<UploadTokenRow | undefined> {
    if (caller.principal.kind !== 'upload_token') return undefined;
    const token = await findToken(q, caller.principal.tokenId);
    if (!token) throw unauthenticated();
    if (token.expires_at.getTime() <= Date.now()) throw tokenExpired();
    return token;
  }

  /**
   * Makes the byte source of `planned` in the store, then records the upload in one transaction
   * (`record`); a source whose upload is not recorded is undone, so nothing is left in the store.
   */
  async function fromSource<T, U, R>(
    source: ByteSource<T, U>,
    planned: PlannedObject,
    record: (q: Queryable, made: T) => Promise<R>,
  ): Promise<R> {
    const made = await source.make(planned);
    try {
      const result = await db.tx((q) => record(q, made));
      metrics?.uploads.inc({ outcome: 'initiated' });
      return result;
    } catch (error) {
      await source.undo(made, planned).catch(() => undefined);
      throw error;
    }
  }

  /** Runs `commit` with the object written under `key`; the object goes when the commit does not happen. */
  async function keepingOnCommit<T>(key: string, commit: () => Promise<T>): Promise<T> {
    try {
      return await commit();
    } catch (error) {
      await store.delete(key).catch(() => undefined);
      throw error;
    }
  }

  return { tokenOf, fromSource, keepingOnCommit };
}

export type Intake = ReturnType<typeof createIntake>;
