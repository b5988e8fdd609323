import type { Caller } from '../../domain/principal.ts';
import { MAX_TAG_LENGTH, normalizeTags } from '../../modules/files/rules.ts';
import type { Services } from '../../services.ts';
import { invalidArgument, malformedXml, S3Error } from './errors.ts';
import { parseTaggingXml } from './xml.ts';

/**
 * S3 object tags as Coffer's tags, which are the file's (not a version's): the tag (Key, Value) is the
 * Coffer tag `Key=Value`, or `Key` alone when its Value is empty; a Coffer tag reads back split at its
 * first `=`, one without `=` being a Key with an empty Value.
 */
export interface S3Tag {
  Key: string;
  Value: string;
}

/** S3's limits on the tags one write sends; lengths in UTF-16 code units, as S3 counts them. */
const MAX_TAGS = 10;
const MAX_KEY_LENGTH = 128;
const MAX_VALUE_LENGTH = 256;

export const s3TagOf = (tag: string): S3Tag => {
  const split = tag.indexOf('=');
  return split < 0 ? { Key: tag, Value: '' } : { Key: tag.slice(0, split), Value: tag.slice(split + 1) };
};

const cofferTagOf = ({ Key, Value }: S3Tag) => (Value === '' ? Key : `${Key}=${Value}`);

/** A Tagging document's TagSet of a file's tags. */
export const tagSetOf = (tags: readonly string[]) => ({ Tag: tags.map(s3TagOf) });

/** `x-amz-tagging-count` of GetObject and HeadObject: the file's tags, when it has some. */
export const taggingCountOf = (tags: readonly string[]): Record<string, string> =>
  tags.length > 0 ? { 'x-amz-tagging-count': String(tags.length) } : {};

const invalidTag = (message: string, details: Record<string, string>) =>
  new S3Error(400, 'InvalidTag', message, { details });
const because = (why: string | undefined) => (why ? `: ${why}` : '');
const invalidKey = (Key: string, why?: string) =>
  invalidTag(`The TagKey you have provided is invalid${because(why)}`, { TagKey: Key });
const invalidValue = ({ Key, Value }: S3Tag, why?: string) =>
  invalidTag(`The TagValue you have provided is invalid${because(why)}`, { TagKey: Key, TagValue: Value });

/** Whether Coffer keeps `tag` as it is: normalizeTags neither changes nor refuses it. */
function keptAsIs(tag: string): boolean {
  try {
    return normalizeTags([tag])[0] === tag;
  } catch {
    return false;
  }
}

/**
 * The Coffer tags of the tag set a write sends, checked before anything is stored: as S3 checks them
 * (at most 10, 400 BadRequest past them as S3 words it; a Key of 1 to 128 characters and a Value of at
 * most 256, each key once, 400 InvalidTag otherwise), then as Coffer keeps them (400 InvalidTag): no
 * `=` in a Key, which would read back otherwise, `Key=Value` within Coffer's 64 characters, no spaces
 * at its ends nor control characters, which Coffer's tags do not hold.
 */
export function cofferTagsOf(tags: readonly S3Tag[]): string[] {
  if (tags.length > MAX_TAGS) throw new S3Error(400, 'BadRequest', 'Object tags cannot be greater than 10');
  const seen = new Set<string>();
  return tags.map((tag) => {
    const { Key, Value } = tag;
    if (Key.length === 0 || Key.length > MAX_KEY_LENGTH) throw invalidKey(Key);
    if (Value.length > MAX_VALUE_LENGTH) throw invalidValue(tag);
    if (seen.has(Key)) throw invalidTag('Cannot provide multiple Tags with the same key', { TagKey: Key });
    seen.add(Key);
    if (Key.includes('=')) throw invalidKey(Key, 'Coffer keeps a tag as Key=Value, so a Key holds no =');
    const kept = cofferTagOf(tag);
    if (kept.length > MAX_TAG_LENGTH) {
      throw invalidTag(
        `The tag you have provided is too long: Coffer keeps a tag as Key=Value, in at most ${MAX_TAG_LENGTH} characters`,
        { TagKey: Key, TagValue: Value },
      );
    }
    if (!keptAsIs(kept)) {
      const why = 'Coffer keeps no spaces at the ends of a tag, nor control characters';
      // The Key is at fault when it is the whole tag, or would be with any Value.
      throw Value === '' || !keptAsIs(`${Key}=v`) ? invalidKey(Key, why) : invalidValue(tag, why);
    }
    return kept;
  });
}

const TAGGING = 'x-amz-tagging';

/** An `x-amz-tagging` value that is no URL query string of distinct keys, in S3's words. */
const invalidTaggingHeader = (value: string) =>
  new S3Error(
    400,
    'InvalidArgument',
    "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.",
    { details: { ArgumentName: TAGGING, ArgumentValue: value } },
  );

/**
 * The tags of an `x-amz-tagging` value: a URL query string (`Key1=Value1&Key2`, `+` a space), each
 * key once. One that is not (bytes not percent-encoded, an escape that is not UTF-8, a tag without a
 * key, a key twice) is 400 InvalidArgument.
 */
function parseTaggingHeader(value: string): S3Tag[] {
  if (/[^\x20-\x7e]/.test(value)) throw invalidTaggingHeader(value);
  const decode = (text: string) => {
    try {
      return decodeURIComponent(text.replace(/\+/g, ' '));
    } catch {
      throw invalidTaggingHeader(value);
    }
  };
  const tags: S3Tag[] = [];
  const seen = new Set<string>();
  for (const pair of value.split('&')) {
    if (pair === '') continue;
    const split = pair.indexOf('=');
    const Key = decode(split < 0 ? pair : pair.slice(0, split));
    const Value = split < 0 ? '' : decode(pair.slice(split + 1));
    if (Key === '' || seen.has(Key)) throw invalidTaggingHeader(value);
    seen.add(Key);
    tags.push({ Key, Value });
  }
  return tags;
}

/**
 * The Coffer tags a PutObject, CreateMultipartUpload or CopyObject (REPLACE) sets, checked
 * (cofferTagsOf): its `x-amz-tagging` header or, on a presigned URL, the `x-amz-tagging` query
 * parameter SDK presigners move it into (the header wins); undefined when it sends neither.
 */
export function taggingOf(
  headers: Record<string, string | string[] | undefined>,
  presignedQuery?: URLSearchParams,
): string[] | undefined {
  const header = headers[TAGGING];
  // Sent twice, the header is no one query string.
  if (Array.isArray(header)) throw invalidTaggingHeader(header.join(', '));
  const sent = header ?? [...(presignedQuery ?? [])].find(([name]) => name.toLowerCase() === TAGGING)?.[1];
  return sent === undefined ? undefined : cofferTagsOf(parseTaggingHeader(sent));
}

/** `x-amz-tagging-directive` of a CopyObject: COPY (its default) or REPLACE; S3 knows no other. */
export function taggingDirectiveOf(
  headers: Record<string, string | string[] | undefined>,
): 'COPY' | 'REPLACE' {
  const directive = headers['x-amz-tagging-directive'] ?? 'COPY';
  if (directive !== 'COPY' && directive !== 'REPLACE') throw invalidArgument('Unknown tagging directive.');
  return directive;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The Coffer tags of a PutObjectTagging body, `Tagging/TagSet/Tag` with a Key and a Value each,
 * checked (cofferTagsOf): no body is 400 MissingRequestBodyError, another document 400 MalformedXML.
 */
export function tagsOfDocument(body: Buffer): string[] {
  if (body.length === 0) throw new S3Error(400, 'MissingRequestBodyError', 'Request Body is empty');
  const tagging = parseTaggingXml(body.toString('utf8'))?.Tagging;
  const tagSet = isRecord(tagging) ? tagging.TagSet : undefined;
  // An empty TagSet (`<TagSet/>`, or holding only white space) asks for no tags.
  if (typeof tagSet === 'string' && tagSet.trim() === '') return [];
  if (!isRecord(tagSet)) throw malformedXml();
  const listed = tagSet.Tag ?? [];
  if (!Array.isArray(listed)) throw malformedXml();
  return cofferTagsOf(
    listed.map((tag: unknown) => {
      if (!isRecord(tag) || typeof tag.Key !== 'string' || typeof tag.Value !== 'string')
        throw malformedXml();
      return { Key: tag.Key, Value: tag.Value };
    }),
  );
}

/**
 * Sets the tags of the file `fileId` to `tags` (Coffer's form), an upload token's merged in as on every
 * upload of the token (they are among its constraints, which its S3 credentials carry), through the
 * files service the REST API's tag endpoints use, so that their rules hold alike.
 */
export async function setFileTags(
  services: Pick<Services, 'ingest' | 'files'>,
  caller: Caller,
  fileId: string,
  tags: string[],
): Promise<void> {
  await services.files.setTags(caller, fileId, await services.ingest.writtenTags(caller, tags), 'replace');
}
