import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDomainError } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import type { HttpHeaders } from '../../modules/files/repo.ts';
import type { WriteGuard } from '../../modules/ingest/intake.ts';
import type { Services } from '../../services.ts';
import { partNumberOf } from './content.ts';
import { invalidArgument, malformedXml, noSuchUpload, S3Error } from './errors.ts';
import { placeOf } from './keys.ts';
import { markerResume, type Rolled, rollUp, successor } from './listing.ts';
import { folderFor, replaceableAt, writtenVersion } from './objects.ts';
import { parseS3Xml } from './xml.ts';

/**
 * S3 multipart uploads onto Coffer's multipart sessions. S3 declares no size up front: the file is
 * declared with its size deferred, each part held to the caller's limit, and the size, with the
 * quota, settled at completion.
 */
export type MultipartServices = Pick<Services, 'multipart' | 'folders' | 'db'>;

/**
 * Runs `work` on upload `uploadId` with Coffer's refusals of an unknown, finished or foreign upload
 * in S3's words.
 */
async function onUpload<T>(uploadId: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isDomainError(error, 'NOT_FOUND') || isDomainError(error, 'INVALID_STATE')) {
      throw noSuchUpload(uploadId);
    }
    // A part list that does not match what was uploaded, in S3's words.
    if (isDomainError(error, 'VALIDATION_ERROR') && String(error.details?.field ?? '').startsWith('parts')) {
      const code =
        error.details?.previous_part_number !== undefined
          ? 'InvalidPartOrder'
          : error.details?.min_size_bytes !== undefined
            ? 'EntityTooSmall'
            : 'InvalidPart';
      throw new S3Error(400, code, error.message);
    }
    throw error;
  }
}

/**
 * CreateMultipartUpload: an upload making a new file at `key`, or new content of the file there.
 * `tags` (Coffer's form), when given, are the file's once the upload completes, in the transaction
 * of its content: a new file is made with them.
 */
export async function createUpload(
  services: MultipartServices,
  caller: Caller,
  key: string,
  request: {
    contentType: string;
    metadata: Record<string, string>;
    headers: HttpHeaders;
    tags: string[] | undefined;
  },
): Promise<string> {
  const place = placeOf(key);
  if (place.kind === 'folder') throw invalidArgument('A key ending in / is a folder: it takes no bytes');
  const metadata = Object.keys(request.metadata).length > 0 ? request.metadata : undefined;
  // Taking effect with the content, at completion, as a PutObject's would.
  const http_headers = Object.keys(request.headers).length > 0 ? request.headers : undefined;
  // Over a key that holds a file, the upload makes new content of it, as a PutObject there does.
  const existing = await replaceableAt(services, caller, key);
  const { uploadId } = existing
    ? await services.multipart.startContentDeferred(
        caller,
        existing,
        { content_type: request.contentType, metadata, http_headers },
        request.tags,
      )
    : await services.multipart.startDeferred(
        caller,
        {
          filename: place.filename,
          content_type: request.contentType,
          folder_id: await folderFor(services, caller, place.folderPath),
          exact_folder: true,
          metadata,
          http_headers,
          tags: request.tags,
        },
        { keyed: true },
      );
  return uploadId;
}

/** An upload as S3 names it: its key and its id (an upload of another key is none). */
export interface UploadRef {
  key: string;
  uploadId: string;
}

export const uploadPart = (
  services: MultipartServices,
  caller: Caller,
  { key, uploadId }: UploadRef,
  partNumber: number,
  body: Readable,
  size: number,
) =>
  onUpload(uploadId, () => services.multipart.writePart(caller, uploadId, partNumber, body, size, { key }));

/** The parts a CompleteMultipartUpload lists, from its XML body. */
export function completedParts(xml: string): { part_number: number; etag: string }[] {
  const document = parseS3Xml(xml)?.CompleteMultipartUpload as {
    Part?: { PartNumber?: string; ETag?: string }[];
  };
  const parts = document?.Part;
  if (!parts || parts.length === 0) throw malformedXml();
  return parts.map((part) => {
    if (typeof part.ETag !== 'string' || typeof part.PartNumber !== 'string') throw malformedXml();
    return { part_number: partNumberOf(part.PartNumber), etag: part.ETag };
  });
}

/** How long a complete sent again waits for one under way to end, and how often it looks. */
const COMPLETING_WAIT_MS = 10_000;
const COMPLETING_POLL_MS = 200;

/**
 * What a CompleteMultipartUpload sent again (its answer lost) answers: the first's file and version,
 * once a completion under way has ended, while the content it made is still the file's; undefined
 * for an upload not completed (or no longer the key's content). A completion still under way past
 * COMPLETING_WAIT_MS is a 503 to try again.
 */
export async function completedBefore(
  services: MultipartServices,
  caller: Caller,
  { key, uploadId }: UploadRef,
) {
  const deadline = Date.now() + COMPLETING_WAIT_MS;
  for (;;) {
    const found = await services.multipart.completion(caller, uploadId, key).catch((error: unknown) => {
      if (isDomainError(error, 'NOT_FOUND')) return undefined;
      throw error;
    });
    if (found?.status === 'completed') {
      const { file, contentId } = found;
      return { file, versionId: await writtenVersion(services, caller, file, { contentId }) };
    }
    if (!found) return undefined;
    if (Date.now() >= deadline) {
      throw new S3Error(503, 'SlowDown', 'The upload is still being completed: try again', {
        headers: { 'retry-after': '1' },
      });
    }
    await sleep(COMPLETING_POLL_MS);
  }
}

/**
 * CompleteMultipartUpload: the file, and the version id of its new content where the bucket keeps
 * versions. `guard` holds it to the request's conditions (see guardOf).
 */
export async function completeUpload(
  services: MultipartServices,
  caller: Caller,
  upload: UploadRef,
  parts: { part_number: number; etag: string }[],
  guard?: WriteGuard,
) {
  const { key, uploadId } = upload;
  const { file, contentId, superseded } = await onUpload(uploadId, () =>
    services.multipart.finish(caller, uploadId, parts, { guard, key }),
  );
  // An upload over a key made new content of its file, whose id is that version's.
  return {
    file,
    superseded,
    versionId: await writtenVersion(services, caller, file, { contentId, superseded }),
  };
}

export const abortUpload = (services: MultipartServices, caller: Caller, { key, uploadId }: UploadRef) =>
  onUpload(uploadId, () => services.multipart.abort(caller, uploadId, key));

/** ListParts: the uploaded parts after `marker`, at most `maxParts` of them. */
export async function listParts(
  services: MultipartServices,
  caller: Caller,
  { key, uploadId }: UploadRef,
  marker: number,
  maxParts: number,
) {
  const described = await onUpload(uploadId, () => services.multipart.describe(caller, uploadId, key));
  if (described.status !== 'open') throw noSuchUpload(uploadId);
  const after = described.parts.filter((part) => part.part_number > marker);
  // max-parts=0 asks for an empty page, not truncated, as the other listings answer a limit of 0.
  return { parts: after.slice(0, maxParts), truncated: maxParts > 0 && after.length > maxParts };
}

/** An item of ListMultipartUploads: an open upload, or the common prefix of some. */
export type UploadItem = Rolled<{ key: string; id: string; created_at: Date }>;

/**
 * ListMultipartUploads: open uploads under `prefix`, after the markers, by key then upload id, those
 * whose key holds `delimiter` past the prefix rolled up into one common prefix each; at most
 * `maxUploads + 1` items, so that one more tells the page is truncated; none for `maxUploads` 0, an
 * empty page that is not truncated, as S3 answers max-uploads=0. A key marker that is such a prefix
 * resumes past every upload under it, as the page that ended with it listed them all.
 */
export function listUploads(
  services: MultipartServices,
  caller: Caller,
  options: {
    prefix: string;
    delimiter: string;
    keyMarker: string;
    uploadIdMarker: string;
    maxUploads: number;
  },
): Promise<UploadItem[]> {
  const { prefix, delimiter, keyMarker, uploadIdMarker, maxUploads } = options;
  const resume = markerResume(keyMarker, prefix, delimiter);
  if (maxUploads === 0 || (resume && 'end' in resume)) return Promise.resolve([]);
  const below = prefix ? successor(prefix) : undefined;
  const past = (from: string) => ({ from, below, afterKey: '', afterId: '' });
  // After a key marker without an upload id marker, S3 resumes after every upload of that key.
  const start =
    resume && 'from' in resume
      ? past(resume.from)
      : {
          from: prefix,
          below,
          afterKey: keyMarker,
          afterId: keyMarker && !uploadIdMarker ? '\u{10ffff}' : uploadIdMarker,
        };
  return rollUp((range: typeof start, wanted) => services.multipart.listOpen(caller, range, wanted), {
    start,
    prefix,
    delimiter,
    limit: maxUploads + 1,
    keyOf: (upload) => upload.key,
    after: (upload, range) => ({ ...range, afterKey: upload.key, afterId: upload.id }),
    past,
  });
}
