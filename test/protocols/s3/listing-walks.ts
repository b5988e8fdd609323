/**
 * Walks of every page of Coffer's S3 listings through the AWS SDK, as a client pages through them:
 * each page held to S3's rules on its own (no more items than asked, in key order, KeyCount right,
 * never truncated without a way to go on), the pages' items answered together, to be compared with
 * the model.
 */
import {
  ListMultipartUploadsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'vitest';
import { type BucketModel, compareKeys, type ObjectItem, type Query, sortKeyOf } from './listing-model.ts';

/** A listing asked for: its prefix and delimiter, page size, encoding and where it starts. */
export interface Listing extends Query {
  /** Undefined: S3's default, 1000. */
  maxKeys: number | undefined;
  url: boolean;
  /** Where it starts: at an item of the whole listing (as a page that ended there), or at a string. */
  start: { position: number } | { text: string } | undefined;
}

interface Page<Item, Next> {
  items: Item[];
  truncated: boolean;
  next: Next | undefined;
}

/** A listing's page of items and common prefixes, each in key order, as one list in key order. */
function inKeyOrder<Item extends { key: string }>(
  where: string,
  rows: Item[],
  prefixes: { prefix: string }[],
): (Item | { prefix: string })[] {
  const ordered = <T>(list: T[], keyOf: (item: T) => string, strict: boolean) =>
    list.every((item, at) => {
      const order = at === 0 ? -1 : compareKeys(keyOf(list[at - 1]!), keyOf(item));
      return strict ? order < 0 : order <= 0;
    });
  // Versions and uploads repeat a key; keys and prefixes never do.
  const strict = rows.every((row) => !('id' in row));
  expect(
    ordered(rows, (row) => row.key, strict),
    `${where}: items out of key order`,
  ).toBe(true);
  expect(ordered(prefixes, sortKeyOf, true), `${where}: prefixes out of key order`).toBe(true);
  return [...rows, ...prefixes].sort((a, b) => compareKeys(sortKeyOf(a), sortKeyOf(b)));
}

/** Every page from `first`, each checked on its own; their items in order. */
async function walk<Item, Next>(
  label: string,
  maxKeys: number | undefined,
  expected: number,
  first: Next | undefined,
  fetch: (next: Next | undefined, where: string) => Promise<Page<Item, Next>>,
): Promise<Item[]> {
  const limit = Math.min(maxKeys ?? 1000, 1000);
  const items: Item[] = [];
  let next = first;
  for (let page = 1; ; page++) {
    const where = `${label}, page ${page}`;
    const answer = await fetch(next, where);
    expect(answer.items.length, `${where}: more items than max-keys`).toBeLessThanOrEqual(limit);
    items.push(...answer.items);
    // No room is an empty page, not truncated, as S3 answers a limit of 0.
    if (limit === 0) {
      expect(answer.truncated, `${where}: truncated with no room`).toBe(false);
      return items;
    }
    if (!answer.truncated) return items;
    expect(answer.items.length, `${where}: truncated, and empty`).toBeGreaterThan(0);
    expect(answer.next, `${where}: truncated, with no way to go on`).toBeDefined();
    expect(page, `${where}: more pages than items`).toBeLessThanOrEqual(expected);
    next = answer.next;
  }
}

const truncatedOf = (where: string, value: boolean | undefined) => {
  expect(typeof value, `${where}: IsTruncated missing`).toBe('boolean');
  return value!;
};

const decoderOf = (url: boolean) => (value: string) => (url ? decodeURIComponent(value) : value);

const labelOf = (name: string, listing: Listing) => `${name} ${JSON.stringify(listing)}`;

/** What every request of a listing sends: its bucket, prefix, delimiter and encoding. */
const paramsOf = (bucket: string, { prefix, delimiter, url }: Listing) => ({
  Bucket: bucket,
  Prefix: prefix || undefined,
  Delimiter: delimiter || undefined,
  EncodingType: url ? ('url' as const) : undefined,
});

const prefixesOf = (common: { Prefix?: string }[] | undefined, decode: (value: string) => string) =>
  (common ?? []).map((p) => ({ prefix: decode(p.Prefix!) }));

/** The objects and common prefixes of a page of ListObjects or ListObjectsV2, their keys decoded. */
function objectsOf(
  answer: {
    Contents?: { Key?: string; Size?: number; ETag?: string }[];
    CommonPrefixes?: { Prefix?: string }[];
  },
  decode: (value: string) => string,
) {
  return {
    rows: (answer.Contents ?? []).map((c) => ({ key: decode(c.Key!), size: c.Size!, etag: c.ETag! })),
    prefixes: prefixesOf(answer.CommonPrefixes, decode),
  };
}

/** Where a listing starts as a key marker, and what follows it, for the listings that take one. */
function markedStart<Item extends { key: string } | { prefix: string }>(
  listing: Listing,
  whole: Item[],
  from: (marker: string) => Item[],
): { at?: Item; marker?: string; expected: Item[] } {
  const { start } = listing;
  if (!start) return { expected: whole };
  if ('text' in start) return { marker: start.text, expected: from(start.text) };
  if (whole.length === 0) return { expected: whole };
  const position = start.position % whole.length;
  const at = whole[position]!;
  return { at, marker: sortKeyOf(at), expected: whole.slice(position + 1) };
}

/** ListObjectsV2 from its start-after, by continuation token. */
export async function checkListObjectsV2(
  client: S3Client,
  bucket: string,
  model: BucketModel,
  listing: Listing,
) {
  const { maxKeys, url, start } = listing;
  const decode = decoderOf(url);
  const whole = model.objects(listing);
  const after =
    start && 'position' in start
      ? whole.length > 0
        ? sortKeyOf(whole[start.position % whole.length]!)
        : undefined
      : start?.text;
  const expected = model.objects(listing, after === undefined ? undefined : { after });
  const label = labelOf('ListObjectsV2', listing);
  const items = await walk<ObjectItem, string>(
    label,
    maxKeys,
    expected.length,
    undefined,
    async (token, where) => {
      const answer = await client.send(
        new ListObjectsV2Command({
          ...paramsOf(bucket, listing),
          MaxKeys: maxKeys,
          // Sent on every page, as the SDK's paginator does: the token wins over it.
          StartAfter: after,
          ContinuationToken: token,
        }),
      );
      const { rows, prefixes } = objectsOf(answer, decode);
      expect(answer.KeyCount, `${where}: KeyCount`).toBe(rows.length + prefixes.length);
      return {
        items: inKeyOrder(where, rows, prefixes),
        truncated: truncatedOf(where, answer.IsTruncated),
        next: answer.NextContinuationToken,
      };
    },
  );
  expect(items, label).toEqual(maxKeys === 0 ? [] : expected);
}

/** ListObjects (V1) from its marker, by NextMarker, or the last key where S3 gives none (no delimiter). */
export async function checkListObjects(
  client: S3Client,
  bucket: string,
  model: BucketModel,
  listing: Listing,
) {
  const { delimiter, maxKeys, url } = listing;
  const decode = decoderOf(url);
  const { marker, expected } = markedStart(listing, model.objects(listing), (text) =>
    model.objects(listing, { marker: text }),
  );
  const label = labelOf('ListObjects', listing);
  const items = await walk<ObjectItem, string>(
    label,
    maxKeys,
    expected.length,
    marker,
    async (next, where) => {
      const answer = await client.send(
        new ListObjectsCommand({
          ...paramsOf(bucket, listing),
          MaxKeys: maxKeys,
          Marker: next,
        }),
      );
      const { rows, prefixes } = objectsOf(answer, decode);
      const items = inKeyOrder(where, rows, prefixes);
      const truncated = truncatedOf(where, answer.IsTruncated);
      if (truncated && delimiter) {
        // S3 names the page's last key or prefix, as a client goes on from it.
        expect(answer.NextMarker && decode(answer.NextMarker), `${where}: NextMarker`).toBe(
          items.length > 0 ? sortKeyOf(items.at(-1)!) : undefined,
        );
      }
      const nextMarker = answer.NextMarker ? decode(answer.NextMarker) : rows.at(-1)?.key;
      return { items, truncated, next: nextMarker };
    },
  );
  expect(items, label).toEqual(maxKeys === 0 ? [] : expected);
}

/** Where a listing of versions or of uploads, which repeat a key, goes on: a key and the id there. */
interface KeyIdMarkers {
  keyMarker: string;
  idMarker?: string;
}

/** A page of versions or uploads as answered: its rows (keys decoded), prefixes and next markers. */
interface KeyIdAnswer<Row> {
  rows: Row[];
  prefixes: { Prefix?: string }[] | undefined;
  truncated: boolean | undefined;
  nextKeyMarker: string | undefined;
  nextIdMarker: string | undefined;
}

/** A listing of versions or of uploads from its markers, by its next key marker and next id marker. */
async function checkKeyIdListing<Row extends { key: string; id: string }>(
  name: string,
  listing: Listing,
  listed: (start?: { marker: string }) => (Row | { prefix: string })[],
  send: (next: KeyIdMarkers | undefined, where: string) => Promise<KeyIdAnswer<Row>>,
) {
  const { maxKeys, url } = listing;
  const decode = decoderOf(url);
  const { at, marker, expected } = markedStart(listing, listed(), (text) => listed({ marker: text }));
  const first =
    marker === undefined ? undefined : { keyMarker: marker, idMarker: at && 'id' in at ? at.id : undefined };
  const label = labelOf(name, listing);
  const items = await walk<Row | { prefix: string }, KeyIdMarkers>(
    label,
    maxKeys,
    expected.length,
    first,
    async (next, where) => {
      const answer = await send(next, where);
      const prefixes = prefixesOf(answer.prefixes, decode);
      const following =
        answer.nextKeyMarker === undefined
          ? undefined
          : { keyMarker: decode(answer.nextKeyMarker), idMarker: answer.nextIdMarker };
      return {
        items: inKeyOrder(where, answer.rows, prefixes),
        truncated: truncatedOf(where, answer.truncated),
        next: following,
      };
    },
  );
  expect(items, label).toEqual(maxKeys === 0 ? [] : expected);
}

/** ListObjectVersions from its markers, by NextKeyMarker and NextVersionIdMarker. */
export function checkListObjectVersions(
  client: S3Client,
  bucket: string,
  model: BucketModel,
  listing: Listing,
) {
  const { maxKeys, url } = listing;
  const decode = decoderOf(url);
  return checkKeyIdListing(
    'ListObjectVersions',
    listing,
    (start) => model.versions(listing, start),
    async (next, where) => {
      const answer = await client.send(
        new ListObjectVersionsCommand({
          ...paramsOf(bucket, listing),
          MaxKeys: maxKeys,
          KeyMarker: next?.keyMarker,
          VersionIdMarker: next?.idMarker,
        }),
      );
      // Deleting a key leaves no delete marker in Coffer.
      expect(answer.DeleteMarkers ?? [], `${where}: DeleteMarkers`).toEqual([]);
      return {
        rows: (answer.Versions ?? []).map((v) => ({
          key: decode(v.Key!),
          id: v.VersionId!,
          latest: v.IsLatest!,
          size: v.Size!,
        })),
        prefixes: answer.CommonPrefixes,
        truncated: answer.IsTruncated,
        nextKeyMarker: answer.NextKeyMarker,
        nextIdMarker: answer.NextVersionIdMarker,
      };
    },
  );
}

/** ListMultipartUploads from its markers, by NextKeyMarker and NextUploadIdMarker. */
export function checkListMultipartUploads(
  client: S3Client,
  bucket: string,
  model: BucketModel,
  listing: Listing,
) {
  const { maxKeys, url } = listing;
  const decode = decoderOf(url);
  return checkKeyIdListing(
    'ListMultipartUploads',
    listing,
    (start) => model.openUploads(listing, start),
    async (next) => {
      const answer = await client.send(
        new ListMultipartUploadsCommand({
          ...paramsOf(bucket, listing),
          MaxUploads: maxKeys,
          KeyMarker: next?.keyMarker,
          UploadIdMarker: next?.idMarker,
        }),
      );
      return {
        rows: (answer.Uploads ?? []).map((u) => ({ key: decode(u.Key!), id: u.UploadId! })),
        prefixes: answer.CommonPrefixes,
        truncated: answer.IsTruncated,
        nextKeyMarker: answer.NextKeyMarker,
        nextIdMarker: answer.NextUploadIdMarker,
      };
    },
  );
}
