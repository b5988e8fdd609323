import type { Queryable } from '../../infra/db.ts';
import { type KeyEntry, type KeyRange, listKeys } from '../../modules/files/key-repo.ts';
import { invalidArgument, S3Error } from './errors.ts';
import { EMPTY_ETAG, etagOf } from './etag.ts';
import { urlEncodeKey } from './keys.ts';

/**
 * The smallest string above every string that starts with `prefix`, in UTF-8 byte order: its last
 * code point, counted up (past the surrogates, which UTF-8 cannot hold).
 */
export function successor(prefix: string): string | undefined {
  const points = [...prefix];
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!;
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
      return points.join('') + String.fromCodePoint(next);
    }
  }
  return undefined;
}

/** The common prefix `key` rolls up into: up to the first `delimiter` past `prefix`, when it has one. */
export function commonPrefixOf(key: string, prefix: string, delimiter: string): string | undefined {
  const at = delimiter && key.startsWith(prefix) ? key.indexOf(delimiter, prefix.length) : -1;
  return at >= 0 ? key.slice(0, at + delimiter.length) : undefined;
}

/**
 * Where a walk resumes: after a key, past every key under a common prefix (from the first string
 * above them), or nowhere, past a prefix of the last code points, which nothing sorts after.
 */
export type Resume = { after: string } | { from: string } | { end: true };

/**
 * Where a listing resumes after a marker (V1's, a version listing's or ListMultipartUploads' key
 * marker): after the key, or past everything under it when it is a common prefix (as the next marker
 * of a rolled-up page means), i.e. it ends with the delimiter and holds it after the prefix: a marker
 * equal to the prefix skips nothing.
 */
export function markerResume(marker: string | null, prefix: string, delimiter: string): Resume | undefined {
  if (!marker) return undefined;
  if (commonPrefixOf(marker, prefix, delimiter) !== marker) return { after: marker };
  const past = successor(marker);
  return past === undefined ? { end: true } : { from: past };
}

/** An item of a rolled-up listing: a row, or the common prefix that stands for every row under it. */
export type Rolled<Row> = { kind: 'row'; row: Row } | { kind: 'prefix'; prefix: string };

/**
 * Up to `limit` items of a listing in key order from `start`, the rows whose key holds `delimiter`
 * past `prefix` rolled up into one common prefix each and skipped past in one fetch, so a folder of a
 * million keys costs one item, not a million rows. `fetch` reads up to `wanted` rows from a cursor;
 * `after` is the cursor past a row, `past` the one at the first key from a string on.
 */
export async function rollUp<Row, Cursor>(
  fetch: (cursor: Cursor, wanted: number) => Promise<Row[]>,
  options: {
    start: Cursor;
    prefix: string;
    delimiter: string;
    limit: number;
    keyOf: (row: Row) => string;
    after: (row: Row, cursor: Cursor) => Cursor;
    past: (from: string) => Cursor;
  },
): Promise<Rolled<Row>[]> {
  const { prefix, delimiter, limit, keyOf } = options;
  const items: Rolled<Row>[] = [];
  let cursor = options.start;
  while (items.length < limit) {
    const wanted = limit - items.length;
    const rows = await fetch(cursor, wanted);
    let skipped = false;
    for (const row of rows) {
      const common = commonPrefixOf(keyOf(row), prefix, delimiter);
      if (common === undefined) {
        items.push({ kind: 'row', row });
        cursor = options.after(row, cursor);
        continue;
      }
      items.push({ kind: 'prefix', prefix: common });
      const next = successor(common);
      // Nothing sorts past a prefix of the last code points: the listing ends there.
      if (next === undefined) return items;
      cursor = options.past(next);
      skipped = true;
      break;
    }
    if (!skipped && rows.length < wanted) break;
  }
  return items;
}

export interface Walk {
  /** Keys and common prefixes, in key order. */
  items: Rolled<KeyEntry>[];
  truncated: boolean;
  /** Where the next page starts, when truncated. */
  next?: Resume;
}

/**
 * One page of a bucket's keys under `prefix`, rolled up at `delimiter` into common prefixes, at most
 * `maxKeys` items (keys and prefixes count alike), starting at `resume`; one item more is read to
 * tell whether the page is truncated.
 */
export async function walkKeys(
  q: Queryable,
  projectId: string,
  options: { prefix: string; delimiter: string; maxKeys: number; resume?: Resume },
): Promise<Walk> {
  const { prefix, delimiter, maxKeys, resume } = options;
  if (maxKeys === 0 || (resume && 'end' in resume)) return { items: [], truncated: false };
  const bounds: KeyRange = { from: prefix || undefined, below: prefix ? successor(prefix) : undefined };
  const start: KeyRange = { ...bounds, ...resume };
  if (resume && 'from' in resume && prefix > resume.from) start.from = prefix;
  const rolled = await rollUp((range: KeyRange, wanted) => listKeys(q, projectId, range, wanted), {
    start,
    prefix,
    delimiter,
    limit: maxKeys + 1,
    keyOf: (entry) => entry.key,
    after: (entry) => ({ ...bounds, after: entry.key }),
    past: (from) => ({ ...bounds, from }),
  });
  if (rolled.length <= maxKeys) return { items: rolled, truncated: false };
  const items = rolled.slice(0, maxKeys);
  const last = items.at(-1)!;
  // A prefix in the page has a successor: one without any ends the listing (rollUp).
  const next = last.kind === 'row' ? { after: last.row.key } : { from: successor(last.prefix)! };
  return { items, truncated: true, next };
}

/** A continuation token: where the next page starts, opaque to the client. */
export const encodeToken = (resume: Resume) => Buffer.from(JSON.stringify(resume)).toString('base64url');

export function decodeToken(token: string): Resume {
  try {
    const resume = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Resume;
    const value = 'after' in resume ? resume.after : 'from' in resume ? resume.from : undefined;
    if (typeof value === 'string' && Object.keys(resume).length === 1) return resume;
  } catch {
    // refused below
  }
  throw invalidArgument('The continuation token provided is incorrect');
}

/** The largest value S3 reads a listing's number parameters into: a signed 32-bit integer's. */
const MAX_INT = 2 ** 31 - 1;

/**
 * A number parameter of a listing (`max-keys`, `max-uploads`, `max-parts`, `part-number-marker`) as
 * S3 reads it: `absent` when not given; otherwise a 32-bit integer, refused with InvalidArgument
 * naming the parameter and its value when it is none (`abc`, `1.5`, past the range) or negative.
 */
export function listingNumberOf(query: URLSearchParams, parameter: string, absent: number): number {
  const value = query.get(parameter);
  if (value === null) return absent;
  const refused = (message: string) =>
    new S3Error(400, 'InvalidArgument', message, {
      details: { ArgumentName: parameter, ArgumentValue: value },
    });
  const number = /^[+-]?\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(number >= -MAX_INT - 1 && number <= MAX_INT)) {
    throw refused(`Provided ${parameter} not an integer or within integer range`);
  }
  if (number < 0) throw refused(`Argument ${parameter} must be an integer between 0 and ${MAX_INT}`);
  return number;
}

/** The most items a listing page holds (`max-keys`, `max-uploads`, `max-parts`): 1000 when absent or more. */
export const pageSizeOf = (query: URLSearchParams, parameter: string) =>
  Math.min(listingNumberOf(query, parameter, 1000), 1000);

/**
 * A listing's `encoding-type`: `url` (its keys, prefixes, delimiter and markers written
 * URL-encoded) or none; S3 knows no other. `encode` writes a value as the listing answers it.
 */
export function encodingOf(value: string | null): { url: boolean; encode: (value: string) => string } {
  if (value === null) return { url: false, encode: (text) => text };
  if (value !== 'url') throw invalidArgument('Invalid Encoding Method specified in Request');
  return { url: true, encode: urlEncodeKey };
}

/**
 * `<Contents>` and `<CommonPrefixes>` of a listing page, keys written by `encode` (encodingOf), each
 * key with its `owner` when given.
 */
export function listed(walk: Walk, encode: (key: string) => string, owner?: Record<string, string>) {
  const contents: Record<string, unknown>[] = [];
  const prefixes: Record<string, unknown>[] = [];
  for (const item of walk.items) {
    if (item.kind === 'prefix') prefixes.push({ Prefix: encode(item.prefix) });
    else {
      const entry = item.row;
      const [modified, etag, size] =
        'file' in entry
          ? [entry.file.updated_at, etagOf(entry.file), entry.file.size_bytes]
          : [entry.folder.created_at, EMPTY_ETAG, 0];
      contents.push({
        Key: encode(entry.key),
        LastModified: modified.toISOString(),
        ETag: etag,
        Size: size,
        StorageClass: 'STANDARD',
        ...(owner ? { Owner: owner } : {}),
      });
    }
  }
  return { Contents: contents, CommonPrefixes: prefixes };
}
