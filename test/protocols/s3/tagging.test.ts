import { createHash } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectTaggingCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  S3ServiceException,
  type Tag,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it, vi } from 'vitest';
import { ADMIN_KEY, type TestProject } from '../../support/coffer.ts';
import { type Bucket, newS3Credential, s3EndpointSuite, signedHeaders } from '../../support/s3-endpoint.ts';

// S3 object tags are Coffer's tags of the file at the key: (Key, Value) is the tag `Key=Value`, or
// `Key` when Value is empty. Every result is checked through the REST API: the file's `tags` and a
// `?tags=` filter.
const { coffer, clientFor, bucketWith, cutInAfterNextWrite } = s3EndpointSuite();

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

/** The tags of each ready file named `filename`. */
async function readyTagsOf(project: TestProject, filename: string) {
  const { items } = (await project.call('GET', `/files?q=${encodeURIComponent(filename)}&status=ready`)).body;
  return items.map((file: { tags: string[] }) => file.tags);
}

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

/** A multipart upload of `Key` in one part, `Tagging` on its CreateMultipartUpload; completes it unless told not to. */
async function uploadInParts(b: Bucket, Key: string, Tagging?: string) {
  const { client, name: Bucket } = b;
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket, Key, Tagging }));
  const part = await client.send(
    new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: 'parts' }),
  );
  const complete = () =>
    client.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
  return { UploadId, complete };
}

/** A request to the object `key` signed as an SDK signs it, with any body and headers. */
async function signedFetch(
  b: Bucket,
  method: string,
  key: string,
  options: { query?: Record<string, string>; headers?: Record<string, string>; body?: string } = {},
) {
  const body = options.body ?? '';
  const headers = await signedHeaders(coffer, b.keys, {
    method,
    path: `/s3/${b.name}/${key}`,
    query: options.query,
    headers: { 'x-amz-content-sha256': createHash('sha256').update(body).digest('hex'), ...options.headers },
  });
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
    expect(await refusal(getTags(b, 'kept.txt', 'ver_01ARZ3NDEKTSV4RRFFQ69G5FAV'))).toMatchObject({
      code: 'NoSuchVersion',
      status: 404,
    });
    // One no version can have, as on GetObject.
    expect(await refusal(getTags(b, 'kept.txt', 'ver_nosuchversion'))).toMatchObject({
      code: 'InvalidArgument',
      status: 400,
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

describe('x-amz-tagging on writes', () => {
  it("PutObject sets the file's tags; one without it keeps them, those set through the REST API too", async () => {
    const b = await bucketWith();
    await put(b, 'a/one.txt', 'a=1&b=two+words&c&d=x%3Dy%26z');
    expect(await tagsOf(b.project, 'one.txt')).toEqual(['a=1', 'b=two words', 'c', 'd=x=y&z']);
    expect(await taggedWith(b.project, 'b=two words', 'c')).toEqual(['one.txt']);
    await put(b, 'a/one.txt', undefined, 'new content');
    expect(await tagsOf(b.project, 'one.txt')).toEqual(['a=1', 'b=two words', 'c', 'd=x=y&z']);
    const { id } = await fileNamed(b.project, 'one.txt');
    await b.project.call('POST', `/files/${id}/tags`, { body: { tags: ['from-rest'] } });
    await put(b, 'a/one.txt', undefined, 'newer content');
    expect(await tagsOf(b.project, 'one.txt')).toContain('from-rest');
    // New content with x-amz-tagging: exactly its tags, the file still the same one.
    await put(b, 'a/one.txt', 'only=this', 'newest content');
    expect(await fileNamed(b.project, 'one.txt')).toMatchObject({ id, tags: ['only=this'] });
    expect(await taggedWith(b.project, 'from-rest')).toEqual([]);
    // An empty x-amz-tagging asks for no tags.
    await put(b, 'a/one.txt', '', 'bare');
    expect(await tagsOf(b.project, 'one.txt')).toEqual([]);
  });

  it('a presigned PutObject carries them in its query, where SDK presigners put the header', async () => {
    const b = await bucketWith();
    const url = await getSignedUrl(
      b.client,
      new PutObjectCommand({ Bucket: b.name, Key: 'signed.txt', Body: 'signed', Tagging: 'via=url' }),
      { expiresIn: 60 },
    );
    expect(new URL(url).searchParams.get('x-amz-tagging')).toBe('via=url');
    expect((await fetch(url, { method: 'PUT', body: 'signed' })).status).toBe(200);
    expect(await tagsOf(b.project, 'signed.txt')).toEqual(['via=url']);
  });

  it("CopyObject gives the destination the source's tags (COPY), or exactly those sent (REPLACE)", async () => {
    const b = await bucketWith();
    await put(b, 'source.txt', 'from=source&plain');
    const copy = (Key: string, extra: object = {}) =>
      b.client.send(
        new CopyObjectCommand({ Bucket: b.name, Key, CopySource: `${b.name}/source.txt`, ...extra }),
      );
    await copy('copied.txt');
    expect(await tagsOf(b.project, 'copied.txt')).toEqual(['from=source', 'plain']);
    await copy('replaced.txt', { TaggingDirective: 'REPLACE', Tagging: 'new=tag' });
    expect(await tagsOf(b.project, 'replaced.txt')).toEqual(['new=tag']);
    await copy('bare.txt', { TaggingDirective: 'REPLACE' });
    expect(await tagsOf(b.project, 'bare.txt')).toEqual([]);
    // Over a file with tags of its own, as S3 gives the copy the source's.
    await put(b, 'over.txt', 'mine=1');
    await copy('over.txt');
    expect(await tagsOf(b.project, 'over.txt')).toEqual(['from=source', 'plain']);
    expect(await taggedWith(b.project, 'from=source')).toEqual(['copied.txt', 'over.txt', 'source.txt']);
    expect(await refusal(copy('never.txt', { TaggingDirective: 'MERGE' }))).toEqual({
      code: 'InvalidArgument',
      status: 400,
      message: 'Unknown tagging directive.',
    });
  });

  it("CreateMultipartUpload's tags are the file's as the upload completes, a new file or new content of one", async () => {
    const b = await bucketWith();
    await (await uploadInParts(b, 'parts/new.bin', 'mp=new')).complete();
    expect(await tagsOf(b.project, 'new.bin')).toEqual(['mp=new']);

    await put(b, 'parts/old.bin', 'before=1');
    const upload = await uploadInParts(b, 'parts/old.bin', 'mp=content&second');
    expect(await tagsOf(b.project, 'old.bin')).toEqual(['before=1']);
    await upload.complete();
    expect(await tagsOf(b.project, 'old.bin')).toEqual(['mp=content', 'second']);
    expect(await taggedWith(b.project, 'second')).toEqual(['old.bin']);
    // Without x-amz-tagging the file keeps its tags.
    await (await uploadInParts(b, 'parts/old.bin')).complete();
    expect(await tagsOf(b.project, 'old.bin')).toEqual(['mp=content', 'second']);

    // Overtaken by a PUT begun after it: the PUT's content and tags stay, as S3's last writer wins.
    const overtaken = await uploadInParts(b, 'parts/taken.bin', 'mp=overtaken');
    await put(b, 'parts/taken.bin', 'put=later');
    await overtaken.complete();
    expect(await readyTagsOf(b.project, 'taken.bin')).toEqual([['put=later']]);

    // Begun at a free key that a PUT begun before it took meanwhile: the completion is new content of
    // that file, and tags it.
    let merging: Awaited<ReturnType<typeof uploadInParts>> | undefined;
    const undo = cutInAfterNextWrite(async () => {
      merging = await uploadInParts(b, 'parts/merged.bin', 'mp=merged');
    });
    await put(b, 'parts/merged.bin', 'put=earlier').finally(undo);
    await merging!.complete();
    expect(await readyTagsOf(b.project, 'merged.bin')).toEqual([['mp=merged']]);
  });

  it("refuses tags it cannot keep before a byte is stored, on every write, in S3's words", async () => {
    const b = await bucketWith();
    await put(b, 'source.txt');
    const writes = (Key: string, Tagging: string) => [
      () => put(b, Key, Tagging),
      () =>
        b.client.send(
          new CopyObjectCommand({
            Bucket: b.name,
            Key,
            CopySource: `${b.name}/source.txt`,
            TaggingDirective: 'REPLACE',
            Tagging,
          }),
        ),
      async () => {
        const { UploadId } = await b.client.send(
          new CreateMultipartUploadCommand({ Bucket: b.name, Key, Tagging }),
        );
        await b.client.send(new AbortMultipartUploadCommand({ Bucket: b.name, Key, UploadId }));
      },
    ];
    const header =
      "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.";
    const eleven = Array.from({ length: 11 }, (_, index) => `k${index}`).join('&');
    const refused: [string, string, string][] = [
      [eleven, 'BadRequest', 'Object tags cannot be greater than 10'],
      ['a=1&a=2', 'InvalidArgument', header],
      ['=1', 'InvalidArgument', header],
      ['a=%FF', 'InvalidArgument', header],
      ['a=%zz', 'InvalidArgument', header],
      [`${'k'.repeat(129)}=1`, 'InvalidTag', 'The TagKey you have provided is invalid'],
      [`k=${'v'.repeat(257)}`, 'InvalidTag', 'The TagValue you have provided is invalid'],
      [
        'a%3Db=1',
        'InvalidTag',
        'The TagKey you have provided is invalid: Coffer keeps a tag as Key=Value, so a Key holds no =',
      ],
      [
        `k=${'v'.repeat(63)}`,
        'InvalidTag',
        'The tag you have provided is too long: Coffer keeps a tag as Key=Value, in at most 64 characters',
      ],
      [
        'k=v%20',
        'InvalidTag',
        'The TagValue you have provided is invalid: Coffer keeps no spaces at the ends of a tag, nor control characters',
      ],
      [
        'k%09=v',
        'InvalidTag',
        'The TagKey you have provided is invalid: Coffer keeps no spaces at the ends of a tag, nor control characters',
      ],
    ];
    for (const [index, [tagging, code, message]] of refused.entries()) {
      const Key = `refused/${index}.txt`;
      for (const write of writes(Key, tagging)) {
        expect(await refusal(write()), tagging).toEqual({ code, status: 400, message });
      }
      expect(await refusal(b.client.send(new HeadObjectCommand({ Bucket: b.name, Key })))).toMatchObject({
        status: 404,
      });
    }
    const uploads = await b.client.send(new ListMultipartUploadsCommand({ Bucket: b.name }));
    expect(uploads.Uploads ?? []).toEqual([]);
    expect((await b.project.call('GET', '/files')).body.total).toBe(1);
  });

  it('a folder takes no tags: 501 for some, an empty set for none', async () => {
    const b = await bucketWith();
    expect(await refusal(put(b, 'folder/', 'a=1', ''))).toMatchObject({
      code: 'NotImplemented',
      status: 501,
    });
    expect((await b.project.call('GET', '/folders')).body.items).toEqual([]);
    await put(b, 'folder/', undefined, '');
    expect(await getTags(b, 'folder/')).toEqual([]);
    expect(await refusal(putTags(b, 'folder/', [{ Key: 'a', Value: '1' }]))).toMatchObject({
      code: 'NotImplemented',
      status: 501,
    });
    await b.client.send(new DeleteObjectTaggingCommand({ Bucket: b.name, Key: 'folder/' }));
    expect(await refusal(getTags(b, 'nowhere/'))).toMatchObject({ code: 'NoSuchKey', status: 404 });
  });
});

describe('who may change tags', () => {
  it("takes files:update_metadata as the REST API does, a long-lived credential's files:upload for it", async () => {
    const b = await bucketWith();
    await put(b, 'scoped.txt', 'start=1');
    const reader = await newS3Credential(coffer, b.project.id, ['files:read']);
    const readOnly = { ...b, client: clientFor(reader.access_key_id, reader.secret_access_key) };
    expect(await getTags(readOnly, 'scoped.txt')).toEqual([{ Key: 'start', Value: '1' }]);
    expect(await refusal(putTags(readOnly, 'scoped.txt', []))).toMatchObject({
      code: 'AccessDenied',
      status: 403,
    });
    const deleteTags = (c: Bucket) =>
      c.client.send(new DeleteObjectTaggingCommand({ Bucket: b.name, Key: 'scoped.txt' }));
    expect(await refusal(deleteTags(readOnly))).toMatchObject({ code: 'AccessDenied', status: 403 });

    // An API key's temporary credentials: its scopes, as on the REST API.
    const temporaryOf = async (scopes: string[]) => {
      const key = await b.project.call('POST', '/api-keys', {
        token: ADMIN_KEY,
        body: { name: 'k', scopes },
      });
      expect(key.status, JSON.stringify(key.body)).toBe(201);
      const minted = await b.project.call('POST', '/s3-credentials/temporary', {
        token: key.body.key,
        body: {},
      });
      expect(minted.status, JSON.stringify(minted.body)).toBe(201);
      const { access_key_id, secret_access_key, session_token } = minted.body;
      return { ...b, client: clientFor(access_key_id, secret_access_key, session_token) };
    };
    const uploader = await temporaryOf(['files:read', 'files:upload']);
    expect(await refusal(putTags(uploader, 'scoped.txt', []))).toMatchObject({
      code: 'AccessDenied',
      status: 403,
    });
    const { id } = await fileNamed(b.project, 'scoped.txt');
    const restTags = (token: string) =>
      b.project.call('PUT', `/files/${id}/tags`, { token, body: { tags: [] } });
    const apiKey = await b.project.call('POST', '/api-keys', {
      token: ADMIN_KEY,
      body: { name: 'rest', scopes: ['files:read', 'files:upload'] },
    });
    expect((await restTags(apiKey.body.key)).status).toBe(403);
    // Its writes set tags, as a REST upload sets them.
    await put(uploader, 'by-uploader.txt', 'up=1');
    expect(await tagsOf(b.project, 'by-uploader.txt')).toEqual(['up=1']);
    const editor = await temporaryOf(['files:read', 'files:update_metadata']);
    await putTags(editor, 'scoped.txt', [{ Key: 'edited', Value: 'yes' }]);
    expect(await tagsOf(b.project, 'scoped.txt')).toEqual(['edited=yes']);

    // A long-lived credential holds files:read, files:upload and files:delete at most: files:upload writes tags.
    await putTags(b, 'scoped.txt', [{ Key: 'by', Value: 'credential' }]);
    expect(await tagsOf(b.project, 'scoped.txt')).toEqual(['by=credential']);
    // A legal hold keeps a file from deletion, not from new tags, as on the REST API.
    const held = await coffer.call('PUT', `/v1/projects/${b.project.id}/files/${id}/legal-hold`, {
      token: ADMIN_KEY,
      body: {},
    });
    expect(held.status, JSON.stringify(held.body)).toBe(200);
    await deleteTags(b);
    expect(await tagsOf(b.project, 'scoped.txt')).toEqual([]);
  });

  it('records the tags a PutObject over a file names with its content, in one transaction', async () => {
    const b = await bucketWith();
    await put(b, 'whole.txt', 'v=1', 'first');
    // No tag change of its own, which could fail once the content is kept, takes part in the write.
    const setTags = vi.spyOn(coffer.services.files, 'setTags').mockRejectedValue(new Error('no tag change'));
    try {
      await put(b, 'whole.txt', 'v=2', 'second');
    } finally {
      setTags.mockRestore();
    }
    expect(await tagsOf(b.project, 'whole.txt')).toEqual(['v=2']);
    const got = await b.client.send(new GetObjectCommand({ Bucket: b.name, Key: 'whole.txt' }));
    expect(await got.Body!.transformToString()).toBe('second');
  });

  it("an upload token's credentials tag their own files only, the token's tags kept", async () => {
    const b = await bucketWith();
    await put(b, 'theirs.txt', 'owner=project');
    const token = await b.project.call('POST', '/upload-tokens', { body: { tags: ['from-token'] } });
    expect(token.status, JSON.stringify(token.body)).toBe(201);
    const minted = await b.project.call('POST', '/s3-credentials/temporary', {
      token: token.body.token,
      body: {},
    });
    const { access_key_id, secret_access_key, session_token } = minted.body;
    const browser = { ...b, client: clientFor(access_key_id, secret_access_key, session_token) };
    await put(browser, 'mine.txt', 'a=1');
    expect(await tagsOf(b.project, 'mine.txt')).toEqual(['a=1', 'from-token']);
    await putTags(browser, 'mine.txt', [{ Key: 'b', Value: '2' }]);
    expect(await tagsOf(b.project, 'mine.txt')).toEqual(['b=2', 'from-token']);
    await browser.client.send(new DeleteObjectTaggingCommand({ Bucket: b.name, Key: 'mine.txt' }));
    expect(await tagsOf(b.project, 'mine.txt')).toEqual(['from-token']);
    expect(await getTags(browser, 'mine.txt')).toEqual([{ Key: 'from-token', Value: '' }]);
    expect(await refusal(putTags(browser, 'theirs.txt', []))).toMatchObject({
      code: 'NoSuchKey',
      status: 404,
    });
    expect(await tagsOf(b.project, 'theirs.txt')).toEqual(['owner=project']);
  });
});
