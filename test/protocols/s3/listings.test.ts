import {
  CreateMultipartUploadCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  type ListMultipartUploadsCommandInput,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  type ListObjectVersionsCommandInput,
  ListPartsCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { madeBeforeAll } from '../../support/coffer.ts';
import { refusal, s3EndpointSuite } from '../../support/s3-endpoint.ts';

// The listings of the S3 endpoint, as the current AWS SDK for JavaScript asks for them: of objects (V1
// and V2), of versions and of multipart uploads, in binary key order, rolled up at a delimiter, page by
// page, URL-encoded when asked; their counts and markers read as S3 reads them.
const { bucketWith, clientFor } = s3EndpointSuite();

/** A client signing with `keys` that gives each request's query `parameters`, as the SDK never sends them. */
function clientSending(keys: [string, string], parameters: Record<string, string>): S3Client {
  const client = clientFor(...keys);
  client.middlewareStack.add(
    (next) => (args) => {
      Object.assign((args.request as { query: Record<string, string> }).query, parameters);
      return next(args);
    },
    { step: 'build' },
  );
  return client;
}

describe('the S3 endpoint', () => {
  const bucket = madeBeforeAll(() => bucketWith());

  it('lists keys in binary order, rolled up at the delimiter, page by page', async () => {
    const { client, name } = await bucketWith();
    const keys = ['a.txt', 'b/1.txt', 'b/2.txt', 'b/c/3.txt', 'é.txt', 'z.txt'];
    for (const key of keys) {
      await client.send(
        new PutObjectCommand({ Bucket: name, Key: key, Body: key, ContentType: 'text/plain' }),
      );
    }
    const all = await client.send(new ListObjectsV2Command({ Bucket: name }));
    // b/ and b/c/ are folders Coffer made for the keys: as in S3, they are no keys of their own.
    expect(all.Contents?.map((entry) => entry.Key)).toEqual([
      'a.txt',
      'b/1.txt',
      'b/2.txt',
      'b/c/3.txt',
      'z.txt',
      'é.txt',
    ]);
    const rolled = await client.send(new ListObjectsV2Command({ Bucket: name, Delimiter: '/' }));
    expect(rolled.Contents?.map((entry) => entry.Key)).toEqual(['a.txt', 'z.txt', 'é.txt']);
    expect(rolled.CommonPrefixes?.map((entry) => entry.Prefix)).toEqual(['b/']);
    const inside = await client.send(
      new ListObjectsV2Command({ Bucket: name, Prefix: 'b/', Delimiter: '/' }),
    );
    expect(inside.Contents?.map((entry) => entry.Key)).toEqual(['b/1.txt', 'b/2.txt']);
    expect(inside.CommonPrefixes?.map((entry) => entry.Prefix)).toEqual(['b/c/']);

    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: name, MaxKeys: 3, ContinuationToken: token }),
      );
      expect(page.KeyCount).toBeLessThanOrEqual(3);
      seen.push(...(page.Contents ?? []).map((entry) => entry.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    expect(seen).toEqual(all.Contents?.map((entry) => entry.Key));

    const after = await client.send(new ListObjectsV2Command({ Bucket: name, StartAfter: 'b/c/3.txt' }));
    expect(after.Contents?.map((entry) => entry.Key)).toEqual(['z.txt', 'é.txt']);
    const v1 = await client.send(new ListObjectsCommand({ Bucket: name, Delimiter: '/', MaxKeys: 1 }));
    expect(v1.Contents?.map((entry) => entry.Key)).toEqual(['a.txt']);
    // V1 names each key's owner, the bucket's organization; V2 only with fetch-owner.
    const { Owner } = await client.send(new ListBucketsCommand({}));
    expect(Owner?.ID).toBeTruthy();
    expect(v1.Contents?.[0]?.Owner).toEqual(Owner);
    expect(after.Contents?.[0]?.Owner).toBeUndefined();
    const owned = await client.send(new ListObjectsV2Command({ Bucket: name, FetchOwner: true, MaxKeys: 1 }));
    expect(owned.Contents?.[0]?.Owner).toEqual(Owner);
    expect(v1.IsTruncated).toBe(true);
    const v1next = await client.send(
      new ListObjectsCommand({ Bucket: name, Delimiter: '/', Marker: v1.NextMarker ?? 'a.txt' }),
    );
    expect(v1next.CommonPrefixes?.map((entry) => entry.Prefix)).toEqual(['b/']);
    // A marker equal to the prefix is no common prefix to skip: the listing starts right after it.
    const fromPrefix = await client.send(
      new ListObjectsCommand({ Bucket: name, Prefix: 'b/', Delimiter: '/', Marker: 'b/' }),
    );
    expect(fromPrefix.Contents?.map((entry) => entry.Key)).toEqual(['b/1.txt', 'b/2.txt']);
    expect(fromPrefix.CommonPrefixes?.map((entry) => entry.Prefix)).toEqual(['b/c/']);
    const encoded = await client.send(
      new ListObjectsV2Command({ Bucket: name, Prefix: 'é', EncodingType: 'url' }),
    );
    // The SDK hands URL-encoded keys on as they came.
    expect(encoded.EncodingType).toBe('url');
    expect(encoded.Contents?.map((entry) => entry.Key)).toEqual(['%C3%A9.txt']);
  });

  it('lists nothing past a key marker that is a common prefix of the last code point, as none follows it', async () => {
    const { client, name } = await bucketWith();
    const last = '\u{10ffff}';
    for (const Key of ['a', `${last}a`])
      await client.send(new PutObjectCommand({ Bucket: name, Key, Body: 'x' }));
    await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: `${last}b` }));
    const whole = await client.send(new ListObjectsCommand({ Bucket: name, Delimiter: last }));
    expect(whole.CommonPrefixes?.map((common) => common.Prefix)).toEqual([last]);
    // A marker naming a common prefix, as a page's NextMarker does, stands for every key under it.
    const marked = { Bucket: name, Delimiter: last };
    const objects = await client.send(new ListObjectsCommand({ ...marked, Marker: last }));
    const versions = await client.send(new ListObjectVersionsCommand({ ...marked, KeyMarker: last }));
    const uploads = await client.send(new ListMultipartUploadsCommand({ ...marked, KeyMarker: last }));
    expect({
      objects: [objects.Contents ?? [], objects.CommonPrefixes ?? [], objects.IsTruncated],
      versions: [versions.Versions ?? [], versions.CommonPrefixes ?? [], versions.IsTruncated],
      uploads: [uploads.Uploads ?? [], uploads.CommonPrefixes ?? [], uploads.IsTruncated],
    }).toEqual({ objects: [[], [], false], versions: [[], [], false], uploads: [[], [], false] });
  });

  it('refuses an encoding-type other than url on every listing', async () => {
    const { client, name } = bucket;
    const EncodingType = 'base64' as 'url';
    for (const listing of [
      new ListObjectsCommand({ Bucket: name, EncodingType }),
      new ListObjectsV2Command({ Bucket: name, EncodingType }),
      new ListObjectVersionsCommand({ Bucket: name, EncodingType }),
    ]) {
      await expect(client.send(listing as ListObjectsCommand)).rejects.toMatchObject({
        name: 'InvalidArgument',
        message: 'Invalid Encoding Method specified in Request',
        $metadata: { httpStatusCode: 400 },
      });
    }
  });

  it('URL-encodes the keys, prefixes, delimiter and markers of ListObjectVersions with encoding-type=url', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    for (const Key of ['my docs/a b+c.txt', 'my docs/sub dir/x.txt']) {
      await client.send(new PutObjectCommand({ Bucket: name, Key, Body: Key, ContentType: 'text/plain' }));
    }
    const list = (input: Partial<ListObjectVersionsCommandInput>) =>
      client.send(new ListObjectVersionsCommand({ Bucket: name, EncodingType: 'url', ...input }));
    // The SDK hands URL-encoded values on as they came.
    const page = await list({ Prefix: 'my docs/', Delimiter: '/', KeyMarker: 'my docs/a b', MaxKeys: 1 });
    expect(page).toMatchObject({
      EncodingType: 'url',
      Prefix: 'my%20docs/',
      Delimiter: '/',
      KeyMarker: 'my%20docs/a%20b',
      NextKeyMarker: 'my%20docs/a%20b%2Bc.txt',
      IsTruncated: true,
    });
    expect(page.Versions?.map((v) => v.Key)).toEqual(['my%20docs/a%20b%2Bc.txt']);
    const rest = await list({
      Prefix: 'my docs/',
      Delimiter: '/',
      KeyMarker: 'my docs/a b+c.txt',
      VersionIdMarker: page.NextVersionIdMarker,
    });
    expect(rest.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['my%20docs/sub%20dir/']);
    const rolled = await list({ Delimiter: '+' });
    expect(rolled).toMatchObject({ Delimiter: '%2B', Prefix: '' });
    expect(rolled.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['my%20docs/a%20b%2B']);
    expect(rolled.Versions?.map((v) => v.Key)).toEqual(['my%20docs/sub%20dir/x.txt']);
    // Without encoding-type, as they are.
    const plain = await client.send(new ListObjectVersionsCommand({ Bucket: name, Delimiter: '+' }));
    expect(plain.EncodingType).toBeUndefined();
    expect(plain.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['my docs/a b+']);
  });

  it('lists multipart uploads rolled up at a delimiter, page by page, URL-encoded when asked', async () => {
    const { client, name } = await bucketWith();
    const ids: Record<string, string> = {};
    for (const key of ['a/1', 'a/2', 'b/x/1', 'c', 'd/1']) {
      ids[key] = (await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: key }))).UploadId!;
    }
    const list = (input: Partial<ListMultipartUploadsCommandInput>) =>
      client.send(new ListMultipartUploadsCommand({ Bucket: name, Delimiter: '/', ...input }));
    const shown = (page: Awaited<ReturnType<typeof list>>) => ({
      uploads: page.Uploads?.map((upload) => upload.Key) ?? [],
      prefixes: page.CommonPrefixes?.map((common) => common.Prefix) ?? [],
      truncated: page.IsTruncated,
      next: page.NextKeyMarker,
    });
    expect(shown(await list({}))).toEqual({
      uploads: ['c'],
      prefixes: ['a/', 'b/', 'd/'],
      truncated: false,
      next: undefined,
    });
    // A prefix counts as one item; a page that ends with one resumes past every upload under it.
    const first = await list({ MaxUploads: 2 });
    expect(shown(first)).toEqual({ uploads: [], prefixes: ['a/', 'b/'], truncated: true, next: 'b/' });
    const second = await list({ MaxUploads: 2, KeyMarker: first.NextKeyMarker });
    expect(shown(second)).toEqual({ uploads: ['c'], prefixes: ['d/'], truncated: false, next: undefined });
    // No room is an empty page, not truncated, as S3 answers max-uploads=0.
    for (const Delimiter of ['/', undefined]) {
      expect(shown(await list({ MaxUploads: 0, Delimiter }))).toEqual({
        uploads: [],
        prefixes: [],
        truncated: false,
        next: undefined,
      });
    }
    expect(shown(await list({ Prefix: 'b/' }))).toEqual({
      uploads: [],
      prefixes: ['b/x/'],
      truncated: false,
      next: undefined,
    });
    const under = await list({ Prefix: 'a/' });
    expect(under.Uploads?.map((upload) => [upload.Key, upload.UploadId])).toEqual([
      ['a/1', ids['a/1']],
      ['a/2', ids['a/2']],
    ]);
    expect(under.Delimiter).toBe('/');
    // Without a delimiter, every upload, each with its initiator and owner.
    const all = await client.send(new ListMultipartUploadsCommand({ Bucket: name }));
    expect(all.Uploads?.map((upload) => upload.Key)).toEqual(['a/1', 'a/2', 'b/x/1', 'c', 'd/1']);
    expect(all.CommonPrefixes ?? []).toEqual([]);
    const { Owner } = await client.send(new ListBucketsCommand({}));
    expect(all.Uploads?.[0]).toMatchObject({ Initiator: Owner, Owner });
    const parts = await client.send(new ListPartsCommand({ Bucket: name, Key: 'c', UploadId: ids.c }));
    expect(parts).toMatchObject({ Initiator: Owner, Owner });
    // encoding-type=url: keys, prefixes, the delimiter and the markers URL-encoded (the SDK hands them on).
    await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'e f+g/h' }));
    const encoded = await list({ Prefix: 'e f', EncodingType: 'url', MaxUploads: 1 });
    expect({ ...shown(encoded), prefix: encoded.Prefix, encoding: encoded.EncodingType }).toEqual({
      uploads: [],
      prefixes: ['e%20f%2Bg/'],
      truncated: false,
      next: undefined,
      prefix: 'e%20f',
      encoding: 'url',
    });
    const flat = await client.send(
      new ListMultipartUploadsCommand({ Bucket: name, Prefix: 'e', EncodingType: 'url' }),
    );
    expect(flat.Uploads?.map((upload) => upload.Key)).toEqual(['e%20f%2Bg/h']);
    expect(
      await refusal(
        client.send(new ListMultipartUploadsCommand({ Bucket: name, EncodingType: 'bogus' as 'url' })),
      ),
    ).toEqual({ code: 'InvalidArgument', status: 400 });
  });

  it('refuses a count or part marker of a listing that is no whole number from 0 to 2147483647, naming it', async () => {
    const { client, name, keys } = await bucketWith();
    const Key = 'listed/parts.bin';
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key }));
    for (const PartNumber of [1, 2]) {
      await client.send(new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber, Body: 'x' }));
    }
    const listings = {
      ListParts: (signer: S3Client) =>
        getSignedUrl(signer, new ListPartsCommand({ Bucket: name, Key, UploadId })),
      ListMultipartUploads: (signer: S3Client) =>
        getSignedUrl(signer, new ListMultipartUploadsCommand({ Bucket: name })),
      ListObjects: (signer: S3Client) => getSignedUrl(signer, new ListObjectsCommand({ Bucket: name })),
      ListObjectsV2: (signer: S3Client) => getSignedUrl(signer, new ListObjectsV2Command({ Bucket: name })),
      ListObjectVersions: (signer: S3Client) =>
        getSignedUrl(signer, new ListObjectVersionsCommand({ Bucket: name })),
    };
    const answer = async (listing: keyof typeof listings, parameter: string, value: string) => {
      const got = await fetch(await listings[listing](clientSending(keys, { [parameter]: value })));
      const body = await got.text();
      const element = (tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(body)?.[1];
      return {
        status: got.status,
        code: element('Code'),
        message: element('Message'),
        name: element('ArgumentName'),
        value: element('ArgumentValue'),
      };
    };
    const refused = (parameter: string, value: string, message: string) => ({
      status: 400,
      code: 'InvalidArgument',
      message,
      name: parameter,
      value,
    });
    const notAnInteger = (parameter: string, value: string) =>
      refused(parameter, value, `Provided ${parameter} not an integer or within integer range`);
    const negative = (parameter: string, value: string) =>
      refused(parameter, value, `Argument ${parameter} must be an integer between 0 and 2147483647`);
    for (const value of ['abc', '1.5', '1e3', '0x1', '2147483648']) {
      expect(await answer('ListParts', 'part-number-marker', value)).toEqual(
        notAnInteger('part-number-marker', value),
      );
    }
    expect(await answer('ListParts', 'part-number-marker', '-1')).toEqual(
      negative('part-number-marker', '-1'),
    );
    expect(await answer('ListParts', 'max-parts', 'abc')).toEqual(notAnInteger('max-parts', 'abc'));
    expect(await answer('ListParts', 'max-parts', '-1')).toEqual(negative('max-parts', '-1'));
    // The other listings read their counts alike.
    expect(await answer('ListMultipartUploads', 'max-uploads', '2.0')).toEqual(
      notAnInteger('max-uploads', '2.0'),
    );
    expect(await answer('ListMultipartUploads', 'max-uploads', '-5')).toEqual(negative('max-uploads', '-5'));
    for (const listing of ['ListObjects', 'ListObjectsV2', 'ListObjectVersions'] as const) {
      expect(await answer(listing, 'max-keys', '99999999999')).toEqual(
        notAnInteger('max-keys', '99999999999'),
      );
      expect(await answer(listing, 'max-keys', '-1')).toEqual(negative('max-keys', '-1'));
    }
    // A whole number in range is taken: a marker skips the parts up to it, a count past 1000 is 1000.
    const listed = await client.send(
      new ListPartsCommand({ Bucket: name, Key, UploadId, PartNumberMarker: '1', MaxParts: 5000 }),
    );
    expect(listed).toMatchObject({ PartNumberMarker: '1', MaxParts: 1000, IsTruncated: false });
    expect(listed.Parts?.map((part) => part.PartNumber)).toEqual([2]);
    // No room is an empty page, not truncated, as the other listings answer.
    const none = await client.send(new ListPartsCommand({ Bucket: name, Key, UploadId, MaxParts: 0 }));
    expect([none.IsTruncated, none.Parts ?? [], none.NextPartNumberMarker]).toEqual([false, [], undefined]);
  });
});
