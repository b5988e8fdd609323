import mimeDb from 'mime-db';
import { validationError } from '../../domain/errors.ts';
import { CLIENT_TYPES } from './client-types.ts';

export const FILE_STATUSES = ['uploading', 'processing', 'ready', 'failed', 'quarantined'] as const;
export type FileStatus = (typeof FILE_STATUSES)[number];

/**
 * How a failure_reason begins when the file was failed only because it could not be scanned (the
 * scanner or the store stayed unavailable for the retry window): such a file may be scanned again.
 */
export const SCAN_UNAVAILABLE = 'scan_unavailable';

export const CATEGORIES = ['image', 'video', 'audio', 'document', 'archive', 'other'] as const;
export type Category = (typeof CATEGORIES)[number];

export const MAX_FILENAME_LENGTH = 255;
/** What checkName refuses in a file or folder name, as the OpenAPI document says it. */
export const NAME_RULES =
  'Not blank, not "." or "..", without slashes, backslashes, control characters or direction overrides';

/** The range a caller's `ttl` of a presigned URL must be in, when it is used. */
export const MIN_URL_TTL_SECONDS = 60;
export const MAX_URL_TTL_SECONDS = 86_400;
export const MAX_TAGS = 50;
export const MAX_TAG_LENGTH = 64;
export const MAX_METADATA_BYTES = 16 * 1024;

const DOCUMENT_TYPES = new Set([
  'application/pdf',
  'application/msword',
  'application/rtf',
  'application/json',
  'application/xml',
  'application/epub+zip',
]);
const DOCUMENT_PREFIXES = [
  'application/vnd.openxmlformats-officedocument.',
  'application/vnd.oasis.opendocument.',
  'application/vnd.ms-',
];
const ARCHIVE_TYPES = new Set([
  'application/zip',
  'application/gzip',
  'application/x-gzip',
  'application/x-tar',
  'application/x-7z-compressed',
  'application/vnd.rar',
  'application/x-rar-compressed',
  'application/x-bzip2',
  'application/x-xz',
  'application/zstd',
]);

/** The category a content type belongs to, as the list filter `category` uses it. */
export function categoryOf(contentType: string): Category {
  const [type] = contentType.split('/');
  if (type === 'image' || type === 'video' || type === 'audio') return type;
  if (ARCHIVE_TYPES.has(contentType)) return 'archive';
  if (
    type === 'text' ||
    DOCUMENT_TYPES.has(contentType) ||
    DOCUMENT_PREFIXES.some((p) => contentType.startsWith(p))
  ) {
    return 'document';
  }
  return 'other';
}

/** Extension → every MIME type the registry knows for it. */
const typesByExtension = new Map<string, Set<string>>();
for (const [type, entry] of Object.entries(mimeDb)) {
  for (const extension of entry.extensions ?? []) {
    let types = typesByExtension.get(extension);
    if (!types) {
      types = new Set();
      typesByExtension.set(extension, types);
    }
    types.add(type);
  }
}

/** Suffixes that wrap a file in compression: the type clients declare is the wrapped file's. */
const COMPRESSIONS = ['gz', 'bz2', 'xz', 'zst', 'br'] as const;
export type Compression = (typeof COMPRESSIONS)[number];

/**
 * One-suffix names of a compressed file, as the two suffixes they stand for: GNU tar's shorthands,
 * and Python's `mimetypes` table (the aws cli), which adds `.tz` and `.svgz`.
 */
const SHORTHANDS = new Map<string, [inner: string, Compression]>([
  ['tgz', ['tar', 'gz']],
  ['taz', ['tar', 'gz']],
  ['tz', ['tar', 'gz']],
  ['tbz', ['tar', 'bz2']],
  ['tbz2', ['tar', 'bz2']],
  ['txz', ['tar', 'xz']],
  ['tzst', ['tar', 'zst']],
  ['svgz', ['svg', 'gz']],
]);

/** The last extension of a name, in lower case. A leading dot alone is no extension. */
function extensionOf(filename: string): string | undefined {
  const dot = filename.lastIndexOf('.');
  return dot > 0 ? filename.slice(dot + 1).toLowerCase() : undefined;
}

/**
 * The compression a name's suffix says its bytes are in, and the name of the file they wrap:
 * `backup.tar.xz` and `backup.txz` are both xz wrapping `backup.tar`.
 */
export function compressionOf(filename: string): { compression: Compression; inner: string } | undefined {
  const extension = extensionOf(filename);
  if (extension === undefined) return undefined;
  const stem = filename.slice(0, filename.lastIndexOf('.'));
  const shorthand = SHORTHANDS.get(extension);
  if (shorthand) return { compression: shorthand[1], inner: `${stem}.${shorthand[0]}` };
  const compression = COMPRESSIONS.find((suffix) => suffix === extension);
  return compression && { compression, inner: stem };
}

/**
 * The extensions a declared type may come from: the last one and, behind a compression suffix, the
 * compression and the extension of the file it wraps (`backup.tar.gz` and `backup.tgz` are sent as
 * gzip or as tar).
 */
function extensionsOf(filename: string): string[] {
  const last = extensionOf(filename);
  if (last === undefined) return [];
  const compressed = compressionOf(filename);
  if (!compressed) return [last];
  const inner = extensionOf(compressed.inner);
  return [...new Set([last, compressed.compression, ...(inner === undefined ? [] : [inner])])];
}

/**
 * The spellings of one type in use: with and without `x-` (`audio/flac`, `audio/x-flac`), and an
 * `x-` subtype under text/ as under application/ (`text/x-sh`, `application/x-sh`).
 */
function spellingsOf(contentType: string): string[] {
  const [type, subtype = ''] = contentType.split('/');
  const bare = subtype.replace(/^x-/, '');
  const spellings = [`${type}/${bare}`, `${type}/x-${bare}`];
  if (type === 'text') spellings.push(`application/x-${bare}`);
  if (type === 'application') spellings.push(`text/x-${bare}`);
  return spellings;
}

/** Whether `extension` can hold `contentType`: an unknown extension can hold anything. */
function extensionHolds(extension: string, contentType: string): boolean {
  const known = typesByExtension.get(extension);
  if (known === undefined || CLIENT_TYPES.get(extension)?.includes(contentType)) return true;
  if (spellingsOf(contentType).some((spelling) => known.has(spelling))) return true;
  // Clients send text/plain for text they have no name for (C sources, say).
  return contentType === 'text/plain' && [...known].every((type) => type.startsWith('text/'));
}

/** Whether the filename's last extension is one clients know and names `contentType`. */
export function extensionNames(filename: string, contentType: string): boolean {
  const extension = extensionOf(filename);
  return (
    extension !== undefined &&
    (typesByExtension.has(extension) || CLIENT_TYPES.has(extension)) &&
    extensionHolds(extension, contentType)
  );
}

/**
 * Whether the filename's extension can hold `contentType`. Unknown extensions, names without
 * one and the generic application/octet-stream are accepted: only a known mismatch is refused.
 */
export function extensionMatches(filename: string, contentType: string): boolean {
  if (contentType === 'application/octet-stream') return true;
  const extensions = extensionsOf(filename);
  return extensions.length === 0 || extensions.some((extension) => extensionHolds(extension, contentType));
}

// C0 and C1 control characters, DEL, and the Unicode direction overrides that disguise extensions.
const FORBIDDEN_IN_NAME = /[\p{Cc}\u202a-\u202e\u2066-\u2069]/u;

/** A name for a file or folder: no path separators, no control characters, not "." or "..". */
export function checkName(field: string, name: string): void {
  const problem =
    name.trim().length === 0
      ? 'must not be empty'
      : name.length > MAX_FILENAME_LENGTH
        ? `must be at most ${MAX_FILENAME_LENGTH} characters`
        : FORBIDDEN_IN_NAME.test(name)
          ? 'must not contain control characters'
          : /[/\\]/.test(name)
            ? 'must not contain path separators'
            : name === '.' || name === '..'
              ? 'must not be . or ..'
              : undefined;
  if (problem) throw validationError(`${field} ${problem}`, { field });
}

/** Trimmed, non-empty, unique tags within the count and length bounds. */
export function normalizeTags(tags: readonly string[], field = 'tags'): string[] {
  const normalized = [...new Set(tags.map((tag) => tag.trim()))];
  if (normalized.some((tag) => tag.length === 0))
    throw validationError(`${field} must not contain empty tags`, { field });
  const long = normalized.find((tag) => tag.length > MAX_TAG_LENGTH || FORBIDDEN_IN_NAME.test(tag));
  if (long !== undefined) {
    throw validationError(`${field} entries must be at most ${MAX_TAG_LENGTH} printable characters`, {
      field,
      value: long,
    });
  }
  if (normalized.length > MAX_TAGS)
    throw validationError(`${field} may hold at most ${MAX_TAGS} tags`, { field });
  return normalized;
}

export function checkMetadataSize(metadata: Record<string, unknown>, field = 'metadata'): void {
  if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) {
    throw validationError(`${field} must serialize to at most ${MAX_METADATA_BYTES} bytes of JSON`, {
      field,
    });
  }
}
