/**
 * What Coffer's S3 listings should answer for a bucket, worked out from the keys written to it and
 * not from Coffer's code: the model the listing property test holds every page walk to. It follows
 * the S3 reference, and Coffer's README where Coffer differs on purpose: deleting a key leaves no
 * delete marker (the key goes, its versions with it), and a folder marker `dir/` is a key only while
 * nothing is under it.
 */

/** Binary UTF-8 order, S3's. */
export const compareKeys = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

export interface Version {
  id: string;
  size: number;
  etag: string;
}

export interface Upload {
  key: string;
  id: string;
}

/** A listed object (a version of one, in ListObjectVersions), or a common prefix. */
export type ObjectItem = { key: string; size: number; etag: string } | { prefix: string };
export type VersionItem = { key: string; id: string; latest: boolean; size: number } | { prefix: string };
export type UploadItem = { key: string; id: string } | { prefix: string };

/** The key an item sorts by: its own, or its prefix. */
export const sortKeyOf = (item: { key: string } | { prefix: string }) =>
  'prefix' in item ? item.prefix : item.key;

/**
 * Where a listing starts: after a key (ListObjectsV2's start-after), or at a marker (ListObjects',
 * ListObjectVersions' and ListMultipartUploads' key marker), which, when it is a common prefix of
 * the listing (as a truncated page names its last one), stands for every key under it.
 */
export type Start = { after: string } | { marker: string } | undefined;

export interface Query {
  prefix: string;
  delimiter: string;
}

/** The common prefix `key` rolls up into: up to the first delimiter after the listing's prefix. */
function rollsInto(key: string, { prefix, delimiter }: Query): string | undefined {
  if (!delimiter || !key.startsWith(prefix)) return undefined;
  const at = key.indexOf(delimiter, prefix.length);
  return at < 0 ? undefined : key.slice(0, at + delimiter.length);
}

/** Whether `key` comes after where the listing starts. */
function passes(key: string, start: Start, query: Query): boolean {
  if (!start) return true;
  if ('after' in start) return compareKeys(key, start.after) > 0;
  const { marker } = start;
  if (rollsInto(marker, query) === marker && key.startsWith(marker)) return false;
  return compareKeys(key, marker) > 0;
}

/** Rows in key order under the prefix, from `start` on, rolled up: each common prefix once. */
function rolled<Row, Item>(
  rows: Row[],
  keyOf: (row: Row) => string,
  item: (row: Row) => Item,
  query: Query,
  start: Start,
): (Item | { prefix: string })[] {
  const items: (Item | { prefix: string })[] = [];
  let lastPrefix: string | undefined;
  for (const row of rows) {
    const key = keyOf(row);
    if (!key.startsWith(query.prefix) || !passes(key, start, query)) continue;
    const prefix = rollsInto(key, query);
    if (prefix === undefined) items.push(item(row));
    else if (prefix !== lastPrefix) items.push({ prefix });
    lastPrefix = prefix;
  }
  return items;
}

/** A bucket as its writes left it. */
export class BucketModel {
  /** Each file key's versions, newest first ("null" its only one where versions are not kept). */
  readonly files = new Map<string, Version[]>();
  /** Folder markers written (`dir/`), listed or not. */
  readonly markers = new Set<string>();
  readonly uploads: (Upload & { over?: number })[] = [];
  readonly versioned: boolean;
  /** Which file each key shows, numbered as they were made: an upload over one ends with it. */
  private readonly fileAt = new Map<string, number>();
  private made = 0;

  constructor(versioned: boolean) {
    this.versioned = versioned;
  }

  /** A PUT of `key`: new content of its file (a new version where they are kept), or a new file. */
  put(key: string, version: Version) {
    const versions = this.files.get(key);
    if (!versions) this.fileAt.set(key, ++this.made);
    this.files.set(key, this.versioned ? [version, ...(versions ?? [])] : [version]);
  }

  /**
   * A DeleteObject of a file's key: the file goes with its versions, leaving no delete marker, and
   * the uploads of new content for it with it (Coffer's uploads are of a file's content: those
   * answer NoSuchUpload); an upload that makes a new file at the key stays.
   */
  delete(key: string) {
    if (!this.files.delete(key)) return;
    const file = this.fileAt.get(key);
    this.uploads.splice(0, this.uploads.length, ...this.uploads.filter((upload) => upload.over !== file));
  }

  /** A CreateMultipartUpload at `key`: over the file there, when there is one. */
  start(key: string, id: string) {
    this.uploads.push({ key, id, over: this.files.has(key) ? this.fileAt.get(key) : undefined });
  }

  /** Keys the bucket lists, in key order: its files', and its markers that nothing is under. */
  keys(): string[] {
    const all = [...this.files.keys(), ...this.markers];
    const empty = (marker: string) => !all.some((key) => key !== marker && key.startsWith(marker));
    return all.filter((key) => !this.markers.has(key) || empty(key)).sort(compareKeys);
  }

  objects(query: Query, start?: Start): ObjectItem[] {
    const row = (key: string) => {
      const newest = this.files.get(key);
      return newest ? { key, size: newest[0]!.size, etag: newest[0]!.etag } : { key, size: 0, etag: EMPTY };
    };
    return rolled(this.keys(), (key) => key, row, query, start);
  }

  versions(query: Query, start?: Start): VersionItem[] {
    const rows = this.keys().flatMap((key) =>
      (this.files.get(key) ?? [{ id: 'null', size: 0 }]).map((version, index) => ({
        key,
        id: version.id,
        latest: index === 0,
        size: version.size,
      })),
    );
    return rolled(
      rows,
      (row) => row.key,
      (row) => row,
      query,
      start,
    );
  }

  /** Open uploads by key, then upload id. */
  openUploads(query: Query, start?: Start): UploadItem[] {
    const sorted = [...this.uploads].sort((a, b) => compareKeys(a.key, b.key) || compareKeys(a.id, b.id));
    return rolled(
      sorted,
      (upload) => upload.key,
      ({ key, id }) => ({ key, id }),
      query,
      start,
    );
  }
}

/** The ETag of no bytes, a folder marker's. */
export const EMPTY = '"d41d8cd98f00b204e9800998ecf8427e"';
