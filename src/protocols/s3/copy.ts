import type { Caller } from '../../domain/principal.ts';
import type { ByteRange } from '../../infra/storage/object-store.ts';
import type { FileRow, HttpHeaders } from '../../modules/files/repo.ts';
import type { WriteGuard } from '../../modules/ingest/intake.ts';
import { requireScope } from './call.ts';
import { type ChecksumAlgorithm, checksumming } from './checksums.ts';
import { checkConditions } from './conditions.ts';
import { type Content, checkVersionId, contentOf } from './content.ts';
import { copyToItself, invalidArgument, noSuchBucket, S3Error } from './errors.ts';
import { fileAt, type ObjectServices, putObject, requireReadable } from './objects.ts';

/** `x-amz-copy-source`: `[/]bucket/key[?versionId=…]`, percent-encoded. */
function copySourceOf(header: string): { bucket: string; key: string; versionId: string | null } {
  const [path = '', query = ''] = header.split('?');
  const decoded = (() => {
    try {
      return decodeURIComponent(path.replace(/^\//, ''));
    } catch {
      throw invalidArgument('Invalid copy source encoding');
    }
  })();
  const slash = decoded.indexOf('/');
  if (slash <= 0 || slash === decoded.length - 1) throw invalidArgument('Invalid copy source object key');
  const versionId = new URLSearchParams(query).get('versionId');
  return { bucket: decoded.slice(0, slash), key: decoded.slice(slash + 1), versionId };
}

/** What a CopyObject or UploadPartCopy copies, and the key and version (if any) its request named. */
export interface CopySource {
  file: FileRow;
  content: Content;
  named: { key: string; versionId: string | null };
}

/**
 * What a CopyObject or UploadPartCopy copies: the object `x-amz-copy-source` names, or the version of it
 * that it names, when the caller may read it and its `x-amz-copy-source-if-*` conditions hold.
 */
export async function copySource(
  services: Pick<ObjectServices, 'db'>,
  caller: Caller,
  headers: Record<string, string | string[] | undefined>,
): Promise<CopySource> {
  requireScope(caller, 'files:read');
  const header = headers['x-amz-copy-source'];
  if (typeof header !== 'string') throw invalidArgument('Copy Source must name one object');
  const named = copySourceOf(header);
  checkVersionId(named.versionId, { inCopySource: true });
  if (named.bucket !== caller.project.bucket) throw noSuchBucket(named.bucket);
  const file = await fileAt(services, caller, named.key);
  requireReadable(file);
  const content = await contentOf(services, caller, file, named);
  const conditions = Object.fromEntries(
    Object.entries(headers)
      .filter(([name]) => name.startsWith('x-amz-copy-source-if-'))
      .map(([name, value]) => [name.replace('x-amz-copy-source-', ''), value]),
  );
  checkConditions(conditions, content, true);
  return { file, content, named };
}

/** `x-amz-copy-source-range` of an UploadPartCopy: `bytes=first-last`, within the source; undefined for all of it. */
export function copyRangeOf(header: string | string[] | undefined, size: number): ByteRange | undefined {
  if (header === undefined) return undefined;
  const match = typeof header === 'string' ? /^bytes=(\d+)-(\d+)$/.exec(header.trim()) : null;
  if (!match) {
    throw invalidArgument(
      'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy',
    );
  }
  const [start, end] = [Number(match[1]), Number(match[2])];
  if (start > end || end >= size) {
    throw new S3Error(416, 'InvalidRange', `The range is not within the source object of size ${size}`);
  }
  return { start, end };
}

/** `x-amz-metadata-directive` of a CopyObject: COPY (its default) or REPLACE; S3 knows no other. */
export function metadataDirectiveOf(
  headers: Record<string, string | string[] | undefined>,
): 'COPY' | 'REPLACE' {
  const directive = headers['x-amz-metadata-directive'] ?? 'COPY';
  if (directive !== 'COPY' && directive !== 'REPLACE') throw invalidArgument('Unknown metadata directive.');
  return directive;
}

/**
 * CopyObject within the bucket: the source's bytes streamed from the store into a new file (or new
 * content) at `key`, with exactly the source's metadata and stored headers (COPY) or the request's
 * (REPLACE), none included, whatever the file there had; the source's type, as it was sent, unless
 * REPLACE names one; the source file's tags (`x-amz-tagging-directive` COPY) or `tags` (REPLACE).
 * `guard` holds the write to the destination's condition. The copy keeps the checksum the source's
 * client sent, its bytes being the same, unless it asks for another algorithm (`checksumAlgorithm`),
 * computed on the way. A copy onto its own key must change something: REPLACE, or a version named
 * (restoring it); otherwise it is refused, as in S3, before a byte is read.
 */
export async function copyObject(
  services: ObjectServices,
  caller: Caller,
  source: CopySource,
  key: string,
  request: {
    replace: boolean;
    contentType: string | undefined;
    metadata: Record<string, string>;
    headers: HttpHeaders;
    /** The destination's tags: undefined for the source's. */
    tags: string[] | undefined;
    checksumAlgorithm: ChecksumAlgorithm | undefined;
    guard?: WriteGuard;
  },
) {
  const { file, content, named } = source;
  if (named.key === key && named.versionId === null && !request.replace) throw copyToItself();
  // REPLACE without a type keeps the source's, as it was sent.
  const sourceType = content.headers['content-type'];
  const replaced =
    request.contentType === undefined && sourceType !== undefined
      ? { ...request.headers, 'content-type': sourceType }
      : request.headers;
  const bytes = await services.store.read(content.storageKey);
  const { checksumAlgorithm } = request;
  const body =
    checksumAlgorithm === undefined || checksumAlgorithm === content.checksum?.algorithm
      ? Object.assign(bytes, { checksum: content.checksum })
      : checksumming(bytes, checksumAlgorithm);
  // A write refused before its bytes are read leaves the store's stream to be closed here.
  const copied = await putObject(services, caller, key, {
    size: content.size,
    contentType: request.replace ? (request.contentType ?? content.contentType) : content.contentType,
    // COPY keeps every value of the source's metadata, those with no header form (numbers, …) too.
    metadata: request.replace ? request.metadata : file.metadata,
    // The file's tags, whichever version is copied: Coffer's tags are the file's.
    tags: request.tags ?? file.tags,
    // The headers of the content copied: a version's own when one is named.
    headers: request.replace ? replaced : content.headers,
    body,
    guard: request.guard,
  }).finally(() => {
    body.destroy();
    bytes.destroy();
  });
  return { ...copied, checksum: body.checksum };
}
