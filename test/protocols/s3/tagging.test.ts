import { createHash } from 'node:crypto';
import {
  DeleteObjectTaggingCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  S3ServiceException,
  type Tag,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sha256 } from '../../../src/protocols/s3/canonical.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';
import { type Bucket, s3EndpointOf } from '../../support/s3-endpoint.ts';

// S3 object tags are Coffer's tags of the file at the key: (Key, Value) is the tag `Key=Value`, or
// `Key` when Value is empty. Every result is checked through the REST API: the file's `tags` and a
// `?tags=` filter.
let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const { bucketWith } = s3EndpointOf(() => coffer);

/** The S3 error a call was refused with, and its message. */
async function refusal(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException)
      return { code: error.name, status: error.$metadata.httpStatusCode, message: error.message };
    throw error;
  }
  throw new Error('the request was not refused');
}

/** The file named `filename` as the REST API shows it (names are unique in these tests). */
async function fileNamed(project: TestProject, filename: string) {
  const { items } = (await project.call('GET', `/files?q=${encodeURIComponent(filename)}`)).body;
  const found = items.filter((file: { filename: string }) => file.filename === filename);
  expect(found, filename).toHaveLength(1);
  return found[0] as { id: string; tags: string[] };
}

const tagsOf = async (project: TestProject, filename: string) => (await fileNamed(project, filename)).tags;

/** The names of the files the REST API lists with every tag of `tags`. */
async function taggedWith(project: TestProject, ...tags: string[]) {
  const query = tags.map((tag) => `tags=${encodeURIComponent(tag)}`).join('&');
  const { items } = (await project.call('GET', `/files?${query}`)).body;
  return items.map((file: { filename: string }) => file.filename).sort();
}

const getTags = async ({ client, name }: Bucket, Key: string, VersionId?: string) =>
  (await client.send(new GetObjectTaggingCommand({ Bucket: name, Key, VersionId }))).TagSet ?? [];
const putTags = ({ client, name }: Bucket, Key: string, TagSet: Tag[], VersionId?: string) =>
  client.send(new PutObjectTaggingCommand({ Bucket: name, Key, VersionId, Tagging: { TagSet } }));
const put = ({ client, name }: Bucket, Key: string, Tagging?: string, Body = 'bytes') =>
  client.send(new PutObjectCommand({ Bucket: name, Key, Body, Tagging }));

/** A request to the object `key` signed as an SDK signs it, with any body and headers. */
async function signedFetch(
  b: Bucket,
  method: string,
  key: string,
  options: { query?: Record<string, string>; headers?: Record<string, string>; body?: string } = {},
) {
  const { hostname, port, host } = new URL(coffer.url);
  const body = options.body ?? '';
  const signed = await new SignatureV4({
    credentials: { accessKeyId: b.keys[0], secretAccessKey: b.keys[1] },
    region: 'us-east-1',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
  }).sign({
    method,
    protocol: 'http:',
    hostname,
    port: Number(port),
    path: `/s3/${b.name}/${key}`,
    query: options.query ?? {},
    headers: {
      host,
      'x-amz-content-sha256': createHash('sha256').update(body).digest('hex'),
      ...options.headers,
    },
  });
  const { host: _host, ...headers } = signed.headers;
  const query = new URLSearchParams(options.query).toString();
  const url = `${coffer.url}/s3/${b.name}/${key}${query ? `?${query}` : ''}`;
  const answer = await fetch(url, { method, headers, body: method === 'GET' ? undefined : body });
  return { status: answer.status, headers: answer.headers, text: await answer.text() };
}

describe('GetObjectTagging, PutObjectTagging and DeleteObjectTagging', () => {
  it('are the tags of the file, which the REST API shows and filters by, and the other way round', async () => {
    const b = await bucketWith();
    await put(b, 'docs/report.txt');
    expect(await getTags(b, 'docs/report.txt')).toEqual([]);
    await putTags(b, 'docs/report.txt', [
      { Key: 'project', Value: 'blue' },
      { Key: 'urgent', Value: '' },
      { Key: 'formula', Value: 'a=b' },
      { Key: 'two words', Value: 'ünï cødé' },
    ]);
    expect(await tagsOf(b.project, 'report.txt')).toEqual([
      'project=blue',
      'urgent',
      'formula=a=b',
      'two words=ünï cødé',
    ]);
    expect(await taggedWith(b.project, 'project=blue', 'urgent')).toEqual(['report.txt']);
    expect(await taggedWith(b.project, 'formula=a=b')).toEqual(['report.txt']);
    const got = await b.client.send(new GetObjectCommand({ Bucket: b.name, Key: 'docs/report.txt' }));
    expect(got.TagCount).toBe(4);
    const head = await fetch(
      await getSignedUrl(b.client, new HeadObjectCommand({ Bucket: b.name, Key: 'docs/report.txt' })),
      { method: 'HEAD' },
    );
    expect(head.headers.get('x-amz-tagging-count')).toBe('4');

    // Tags set through the REST API read back split at their first =.
    const { id } = await fileNamed(b.project, 'report.txt');
    const replaced = await b.project.call('PUT', `/files/${id}/tags`, {
      body: { tags: ['color=red=ish', 'plain'] },
    });
    expect(replaced.status).toBe(200);
    expect(await getTags(b, 'docs/report.txt')).toEqual([
      { Key: 'color', Value: 'red=ish' },
      { Key: 'plain', Value: '' },
    ]);

    await b.client.send(new DeleteObjectTaggingCommand({ Bucket: b.name, Key: 'docs/report.txt' }));
    expect(await tagsOf(b.project, 'report.txt')).toEqual([]);
    expect(await taggedWith(b.project, 'plain')).toEqual([]);
    expect(await getTags(b, 'docs/report.txt')).toEqual([]);
    const untagged = await b.client.send(new GetObjectCommand({ Bucket: b.name, Key: 'docs/report.txt' }));
    expect(untagged.TagCount).toBeUndefined();
    // An empty tag set removes them too.
    await putTags(b, 'docs/report.txt', [{ Key: 'again', Value: '1' }]);
    await putTags(b, 'docs/report.txt', []);
    expect(await tagsOf(b.project, 'report.txt')).toEqual([]);
  });

  it("takes a version id: a version's tags are its file's", async () => {
    const b = await bucketWith({ versioning_enabled: true });
    const first = await put(b, 'kept.txt', undefined, 'one');
    await put(b, 'kept.txt', undefined, 'two');
    await putTags(b, 'kept.txt', [{ Key: 'v', Value: '1' }]);
    expect(await getTags(b, 'kept.txt', first.VersionId)).toEqual([{ Key: 'v', Value: '1' }]);
    const answered = await putTags(b, 'kept.txt', [{ Key: 'v', Value: '2' }], first.VersionId);
    expect(answered.VersionId).toBe(first.VersionId);
    expect(await tagsOf(b.project, 'kept.txt')).toEqual(['v=2']);
    expect(await getTags(b, 'kept.txt')).toEqual([{ Key: 'v', Value: '2' }]);
    expect(await refusal(getTags(b, 'kept.txt', 'ver_nosuchversion'))).toMatchObject({
      code: 'NoSuchVersion',
      status: 404,
    });
    expect(await refusal(getTags(b, 'missing.txt'))).toMatchObject({ code: 'NoSuchKey', status: 404 });
    expect(await refusal(putTags(b, 'missing.txt', []))).toMatchObject({ code: 'NoSuchKey', status: 404 });
  });

  it("refuses a tag set it cannot keep in S3's words, the tags unchanged; checks the body as sent", async () => {
    const b = await bucketWith();
    await put(b, 'held.txt');
    await putTags(b, 'held.txt', [{ Key: 'keep', Value: '1' }]);
    const eleven = Array.from({ length: 11 }, (_, index) => ({ Key: `k${index}`, Value: '' }));
    const refused: [Tag[], { code: string; message: string }][] = [
      [eleven, { code: 'BadRequest', message: 'Object tags cannot be greater than 10' }],
      [
        [
          { Key: 'a', Value: '1' },
          { Key: 'a', Value: '2' },
        ],
        { code: 'InvalidTag', message: 'Cannot provide multiple Tags with the same key' },
      ],
      [[{ Key: '', Value: 'v' }], { code: 'InvalidTag', message: 'The TagKey you have provided is invalid' }],
      [
        [{ Key: 'k'.repeat(129), Value: '' }],
        { code: 'InvalidTag', message: 'The TagKey you have provided is invalid' },
      ],
      [
        [{ Key: 'k', Value: 'v'.repeat(257) }],
        { code: 'InvalidTag', message: 'The TagValue you have provided is invalid' },
      ],
      [
        [{ Key: 'a=b', Value: 'c' }],
        {
          code: 'InvalidTag',
          message:
            'The TagKey you have provided is invalid: Coffer keeps a tag as Key=Value, so a Key holds no =',
        },
      ],
      [
        [{ Key: 'k', Value: 'v'.repeat(63) }],
        {
          code: 'InvalidTag',
          message:
            'The tag you have provided is too long: Coffer keeps a tag as Key=Value, in at most 64 characters',
        },
      ],
      [
        [{ Key: ' k', Value: 'v' }],
        {
          code: 'InvalidTag',
          message:
            'The TagKey you have provided is invalid: Coffer keeps no spaces at the ends of a tag, nor control characters',
        },
      ],
      [
        [{ Key: 'k', Value: 'v ' }],
        {
          code: 'InvalidTag',
          message:
            'The TagValue you have provided is invalid: Coffer keeps no spaces at the ends of a tag, nor control characters',
        },
      ],
    ];
    for (const [TagSet, error] of refused) {
      expect(await refusal(putTags(b, 'held.txt', TagSet)), JSON.stringify(TagSet)).toEqual({
        ...error,
        status: 400,
      });
    }
    // 10 tags, a Key=Value of 64 characters: kept.
    await putTags(b, 'held.txt', [...eleven.slice(2), { Key: 'k', Value: 'v'.repeat(62) }]);
    expect(await tagsOf(b.project, 'held.txt')).toHaveLength(10);
    await putTags(b, 'held.txt', [{ Key: 'keep', Value: '1' }]);

    const tagging = { tagging: '' };
    const document = (tags: string) => `<Tagging><TagSet>${tags}</TagSet></Tagging>`;
    const md5 = (text: string) => createHash('md5').update(text).digest('base64');
    const raw: [string, Record<string, string>, number, string][] = [
      ['', {}, 400, 'MissingRequestBodyError'],
      ['<Tagging><TagSet>', {}, 400, 'MalformedXML'],
      ['<Tagging></Tagging>', {}, 400, 'MalformedXML'],
      [document('<Tag><Key>a</Key></Tag>'), {}, 400, 'MalformedXML'],
      [
        document('<Tag><Key>a</Key><Value>1</Value></Tag>'),
        { 'content-md5': md5('other') },
        400,
        'BadDigest',
      ],
    ];
    for (const [body, headers, status, code] of raw) {
      const answer = await signedFetch(b, 'PUT', 'held.txt', { query: tagging, headers, body });
      expect({ status: answer.status, text: answer.text }, body).toMatchObject({
        status,
        text: expect.stringContaining(`<Code>${code}</Code>`),
      });
    }
    expect(await tagsOf(b.project, 'held.txt')).toEqual(['keep=1']);
    // As sent, spaces within a key or value and a Content-MD5 that matches.
    const spaced = document('<Tag>\n  <Key>a key</Key>\n  <Value>a value</Value>\n</Tag>');
    const answer = await signedFetch(b, 'PUT', 'held.txt', {
      query: tagging,
      headers: { 'content-md5': md5(spaced) },
      body: spaced,
    });
    expect(answer.status, answer.text).toBe(200);
    expect(await tagsOf(b.project, 'held.txt')).toEqual(['a key=a value']);
  });
});
