import { randomBytes } from 'node:crypto';
import { validationError } from '../../domain/errors.ts';

/**
 * A project's bucket on the S3 endpoint: 3 to 63 lowercase letters, digits and hyphens, starting and
 * ending with a letter or digit (S3's own rule, less the dots, which path-style addressing never needs).
 */
export const BUCKET_PATTERN = '^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$';
const BUCKET = new RegExp(BUCKET_PATTERN);
const MAX_LENGTH = 63;
const SUFFIX_LENGTH = 6;

/** Prefixes and suffixes S3 reserves: no bucket's name starts or ends with them. */
const RESERVED_PREFIXES = ['xn--', 'sthree-', 'amzn-s3-demo-'];
const RESERVED_SUFFIXES = ['-s3alias', '--ol-s3', '.mrap', '--x-s3', '--table-s3'];

const reservedPrefixOf = (name: string) => RESERVED_PREFIXES.find((prefix) => name.startsWith(prefix));

/** Whether `name` starts or ends as S3 reserves for its own buckets and aliases (a client may refuse it). */
export const isReservedBucketName = (name: string) =>
  reservedPrefixOf(name) !== undefined || RESERVED_SUFFIXES.some((suffix) => name.endsWith(suffix));

/** Whether `name` has the shape of a project's bucket (one made before reserved names were refused included). */
export const isBucketName = (name: string) => BUCKET.test(name);

export function checkBucket(name: string): string {
  if (!isBucketName(name)) {
    throw validationError(
      'bucket must be 3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit',
      { field: 'bucket', value: name },
    );
  }
  if (isReservedBucketName(name)) {
    throw validationError(
      `bucket may not start with ${RESERVED_PREFIXES.join(', ')} nor end with ${RESERVED_SUFFIXES.join(', ')}: S3 reserves them`,
      { field: 'bucket', value: name },
    );
  }
  return name;
}

/**
 * The bucket a project's name suggests (the migration 014 derives the same for existing projects):
 * accents dropped, lowercased, every run of other characters a hyphen, trimmed to 63 characters;
 * "project" for a name with no letter or digit. It may be shorter than 3, or end as S3 reserves:
 * `withSuffix` then fits it. A prefix S3 reserves is dropped.
 */
export function bucketBase(projectName: string): string {
  const base = projectName
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, MAX_LENGTH)
    .replace(/-+$/, '');
  let unreserved = base;
  // Until none is left: one dropped may uncover another (`amzn-s3-demo-sthree-x`).
  for (let prefix = reservedPrefixOf(unreserved); prefix; prefix = reservedPrefixOf(unreserved)) {
    unreserved = unreserved.slice(prefix.length);
  }
  return unreserved === '' ? 'project' : unreserved;
}

/** `base` with a random suffix of 6 letters and digits, within 63 characters. */
export function withSuffix(base: string): string {
  const suffix = [...randomBytes(SUFFIX_LENGTH)].map((byte) => (byte % 36).toString(36)).join('');
  return `${base.slice(0, MAX_LENGTH - SUFFIX_LENGTH - 1).replace(/-+$/, '')}-${suffix}`;
}

/** The candidates for a project without a chosen bucket, in order: the base alone when it fits, then suffixed ones. */
export function* bucketCandidates(projectName: string): Generator<string> {
  const base = bucketBase(projectName);
  if (isBucketName(base) && !isReservedBucketName(base)) yield base;
  for (;;) yield withSuffix(base);
}
