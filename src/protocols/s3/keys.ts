import { isReservedBucketName } from '../../modules/projects/bucket.ts';
import { invalidArgument, S3Error } from './errors.ts';

/** S3's limit on a key, in UTF-8 bytes. */
const MAX_KEY_BYTES = 1024;

/**
 * Whether `name` is a bucket name by S3's rules: 3 to 63 lowercase letters, digits, dots and hyphens,
 * starting and ending with a letter or digit, no two dots together, not an IP address, none of the
 * reserved prefixes and suffixes. A name S3 allows may still name no bucket of Coffer's (which take no
 * dots): that one is missing, not invalid.
 */
export const isS3BucketName = (name: string) =>
  /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name) &&
  !name.includes('..') &&
  !/^\d+\.\d+\.\d+\.\d+$/.test(name) &&
  !isReservedBucketName(name);

/** Where a key lives in Coffer: a file `filename` in the folder at `folderPath` (null: the root), or a folder. */
export type KeyPlace =
  | { kind: 'file'; folderPath: string | null; filename: string }
  | { kind: 'folder'; folderPath: string };

/**
 * The folder and name a key stands for: `photos/2026/cat.jpg` is `cat.jpg` in `photos/2026`, and
 * `photos/2026/` the folder itself. Coffer's folders have names, so a key with an empty segment
 * (`a//b`, `/a`), or a `.` or `..` one, has no place: undefined, as no object can be there. A key S3
 * itself refuses (empty, or too long) is refused.
 */
export function placeIfAny(key: string): KeyPlace | undefined {
  if (key.length === 0) throw invalidArgument('The key must not be empty');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES)
    throw new S3Error(400, 'KeyTooLongError', 'Your key is too long');
  const segments = key.split('/');
  const isFolder = key.endsWith('/');
  if (isFolder) segments.pop();
  if (segments.some((segment) => segment.length === 0 || segment === '.' || segment === '..')) {
    return undefined;
  }
  if (isFolder) return { kind: 'folder', folderPath: segments.join('/') };
  const filename = segments.pop()!;
  return { kind: 'file', folderPath: segments.length > 0 ? segments.join('/') : null, filename };
}

/** The place of a key written or looked up by its place: a key with none is refused. */
export function placeOf(key: string): KeyPlace {
  const place = placeIfAny(key);
  if (!place) {
    throw invalidArgument(
      'Coffer keys are folder names and a file name joined by /: no segment may be empty, . or ..',
    );
  }
  return place;
}

/** Keys and prefixes as S3 sends them with `encoding-type=url`: percent-encoded, slashes kept. */
export const urlEncodeKey = (key: string) => encodeURIComponent(key).replace(/%2F/g, '/');
