import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  type ListObjectVersionsCommandInput,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { type Bucket, md5, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// Versions through the S3 endpoint, as the current AWS SDK for JavaScript talks to it: what a write over
// a key makes with versioning on and off, the version each write and read names, and a key's versions
// listed; every result is checked through Coffer's own REST API too.
const { coffer, bucketWith } = s3EndpointSuite();

/** The statements `work` sends through the database outside transactions, with what it answers. */
async function statementsOf<T>(work: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const { db } = coffer.services;
  const query = db.query;
  const statements: string[] = [];
  db.query = ((sql: string, params?: unknown[]) => {
    statements.push(sql);
    return query.call(db, sql, params);
  }) as typeof db.query;
  try {
    return { result: await work(), statements };
  } finally {
    db.query = query;
  }
}

describe('the S3 endpoint', () => {
  it('a PUT over a key makes a new version where versioning is on, and replaces the content otherwise', async () => {
    const versioned = await bucketWith({ versioning_enabled: true });
    const written: (string | undefined)[] = [];
    for (const body of ['one', 'two']) {
      const put = await versioned.client.send(
        new PutObjectCommand({ Bucket: versioned.name, Key: 'v.txt', Body: body, ContentType: 'text/plain' }),
      );
      written.push(put.VersionId);
    }
    const [file] = (await versioned.project.call('GET', '/files?q=v.txt')).body.items;
    expect((await versioned.project.call('GET', `/files/${file.id}/versions`)).body.total).toBe(2);
    // Every write names the version it made, as ListObjectVersions and HeadObject name it.
    const versionsOf = async (Prefix: string) =>
      (
        await versioned.client.send(new ListObjectVersionsCommand({ Bucket: versioned.name, Prefix }))
      ).Versions?.map((v) => v.VersionId);
    expect(written.every(Boolean)).toBe(true);
    expect(written).toEqual((await versionsOf('v.txt'))?.reverse());
    const head = await versioned.client.send(new HeadObjectCommand({ Bucket: versioned.name, Key: 'v.txt' }));
    expect(head.VersionId).toBe(written[1]);
    const copied: (string | undefined)[] = [];
    for (let round = 0; round < 2; round++) {
      const copy = await versioned.client.send(
        new CopyObjectCommand({
          Bucket: versioned.name,
          Key: 'v-copy.txt',
          CopySource: `${versioned.name}/v.txt`,
        }),
      );
      copied.push(copy.VersionId);
    }
    expect(copied.every(Boolean)).toBe(true);
    expect(copied).toEqual((await versionsOf('v-copy.txt'))?.reverse());
    const url = await getSignedUrl(
      versioned.client,
      new GetObjectCommand({ Bucket: versioned.name, Key: 'v.txt' }),
      { expiresIn: 60 },
    );
    const unchanged = await fetch(url, { headers: { 'if-none-match': head.ETag! } });
    expect(unchanged.status).toBe(304);
    expect(unchanged.headers.get('x-amz-version-id')).toBe(written[1]);
    const plain = await bucketWith();
    for (const body of ['one', 'two']) {
      const put = await plain.client.send(
        new PutObjectCommand({ Bucket: plain.name, Key: 'p.txt', Body: body, ContentType: 'text/plain' }),
      );
      expect(put.VersionId).toBeUndefined();
    }
    const files = (await plain.project.call('GET', '/files?q=p.txt')).body;
    expect(files.total).toBe(1);
    const got = await plain.client.send(new GetObjectCommand({ Bucket: plain.name, Key: 'p.txt' }));
    expect((await text(got.Body)).toString()).toBe('two');
  });

  it('a multipart upload over a key makes new content of its file too, once it completes', async () => {
    /** A two-part upload to `key` of `bytes` (5 MiB and the rest), completed unless `abort`. */
    const multipart = async ({ client, name }: Bucket, key: string, bytes: Buffer, abort = false) => {
      const { UploadId } = await client.send(
        new CreateMultipartUploadCommand({
          Bucket: name,
          Key: key,
          ContentType: 'application/octet-stream',
          Metadata: { round: md5(bytes).slice(0, 8) },
        }),
      );
      const cut = 5 * 1024 * 1024;
      const parts = [];
      for (const [PartNumber, Body] of [bytes.subarray(0, cut), bytes.subarray(cut)].entries()) {
        const part = await client.send(
          new UploadPartCommand({ Bucket: name, Key: key, UploadId, PartNumber: PartNumber + 1, Body }),
        );
        parts.push({ PartNumber: PartNumber + 1, ETag: part.ETag });
      }
      if (abort) {
        await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key: key, UploadId }));
        return;
      }
      const completed = await client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key: key,
          UploadId,
          MultipartUpload: { Parts: parts },
        }),
      );
      return completed.VersionId;
    };
    const first = randomBytes(5 * 1024 * 1024 + 10);
    const second = randomBytes(5 * 1024 * 1024 + 20);
    const third = randomBytes(5 * 1024 * 1024 + 30);
    for (const versioning of [true, false]) {
      const bucket = await bucketWith({ versioning_enabled: versioning });
      const usage = async () => (await bucket.project.call('GET', '/usage')).body;
      const written = [await multipart(bucket, 'big.bin', first)];
      const [file] = (await bucket.project.call('GET', '/files?q=big.bin')).body.items;
      written.push(await multipart(bucket, 'big.bin', second));
      // Given up: the file keeps its content, and the bytes reserved go back.
      await multipart(bucket, 'big.bin', third, true);
      const files = (await bucket.project.call('GET', '/files?q=big.bin')).body;
      expect(files.items.map((f: { id: string }) => f.id)).toEqual([file.id]);
      expect(files.items[0]).toMatchObject({
        size_bytes: second.length,
        status: 'ready',
        metadata: { round: md5(second).slice(0, 8) },
      });
      const got = await bucket.client.send(new GetObjectCommand({ Bucket: bucket.name, Key: 'big.bin' }));
      expect(md5(await text(got.Body))).toBe(md5(second));
      const versions = await bucket.project.call('GET', `/files/${file.id}/versions`);
      if (versioning) expect(versions.body.items).toHaveLength(2);
      else expect(versions.body.error.code).toBe('VERSIONING_DISABLED');
      // Each completion names the version it made, as ListObjectVersions does.
      const listed = await bucket.client.send(
        new ListObjectVersionsCommand({ Bucket: bucket.name, Prefix: 'big.bin' }),
      );
      expect(written).toEqual(
        versioning ? listed.Versions?.map((v) => v.VersionId).reverse() : [undefined, undefined],
      );
      if (versioning) expect(written.every(Boolean)).toBe(true);
      const { storage } = await usage();
      expect(storage.reserved_bytes).toBe(0);
      expect(storage.used_bytes).toBe(versioning ? first.length + second.length : second.length);
    }
  });

  it('names the version a CompleteMultipartUpload over a key made without reading its upload again', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'm.txt', Body: 'first' }));
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'm.txt' }));
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'm.txt', UploadId, PartNumber: 1, Body: 'second' }),
    );
    const { result, statements } = await statementsOf(() =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key: 'm.txt',
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
        }),
      ),
    );
    const listed = await client.send(new ListObjectVersionsCommand({ Bucket: name, Prefix: 'm.txt' }));
    expect(result.VersionId).toBe(listed.Versions?.[0]?.VersionId);
    expect(listed.Versions).toHaveLength(2);
    expect(statements.filter((sql) => /FROM multipart_sessions s LEFT JOIN files/.test(sql))).toHaveLength(1);
  });

  it('names the version a write of a new key made by reading that one version only', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    const { result: put, statements: putting } = await statementsOf(() =>
      client.send(new PutObjectCommand({ Bucket: name, Key: 'n.txt', Body: 'new' })),
    );
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'mp.txt' }));
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'mp.txt', UploadId, PartNumber: 1, Body: 'parts' }),
    );
    const { result: completed, statements: completing } = await statementsOf(() =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key: 'mp.txt',
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
        }),
      ),
    );
    const listed = await client.send(new ListObjectVersionsCommand({ Bucket: name }));
    expect([completed.VersionId, put.VersionId]).toEqual(listed.Versions?.map((v) => v.VersionId));
    for (const statements of [putting, completing]) {
      const reads = statements.filter((sql) => /FROM file_versions/.test(sql));
      expect(reads).toHaveLength(1);
      expect(reads[0]).toMatch(/LIMIT 1$/);
    }
  });

  it('names the current version of a read object by reading that one version only', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    let last: string | undefined;
    for (const Body of ['a', 'b', 'c']) {
      last = (await client.send(new PutObjectCommand({ Bucket: name, Key: 'r.txt', Body }))).VersionId;
    }
    const { result: head, statements } = await statementsOf(() =>
      client.send(new HeadObjectCommand({ Bucket: name, Key: 'r.txt' })),
    );
    expect(head.VersionId).toBe(last);
    const reads = statements.filter((sql) => /FROM file_versions/.test(sql));
    expect(reads).toHaveLength(1);
    expect(reads[0]).toMatch(/LIMIT 1$/);
  });

  it("lists a key's versions newest first, page by page, a page ending inside a key where it must", async () => {
    const versioned = await bucketWith({ versioning_enabled: true });
    const put = (Key: string, Body: string) =>
      versioned.client.send(
        new PutObjectCommand({ Bucket: versioned.name, Key, Body, ContentType: 'text/plain' }),
      );
    for (const body of ['a1', 'a2', 'a3']) await put('a.txt', body);
    await put('b/c.txt', 'c1');
    await put('d.txt', 'd1');
    await put('d.txt', 'd2');
    const list = (input: Partial<ListObjectVersionsCommandInput>) =>
      versioned.client.send(new ListObjectVersionsCommand({ Bucket: versioned.name, ...input }));
    const all = await list({});
    expect(all.IsTruncated).toBe(false);
    expect(all.Versions?.map((v) => [v.Key, v.IsLatest, v.Size])).toEqual([
      ['a.txt', true, 2],
      ['a.txt', false, 2],
      ['a.txt', false, 2],
      ['b/c.txt', true, 2],
      ['d.txt', true, 2],
      ['d.txt', false, 2],
    ]);
    const got = await versioned.client.send(
      new GetObjectCommand({ Bucket: versioned.name, Key: 'a.txt', VersionId: all.Versions![2]!.VersionId }),
    );
    expect((await text(got.Body)).toString()).toBe('a1');
    // Every version keeps the MD5 ETag it was stored with.
    expect(got.ETag).toBe(`"${md5('a1')}"`);
    expect(all.Versions?.filter((v) => v.Key === 'a.txt').map((v) => v.ETag)).toEqual(
      ['a3', 'a2', 'a1'].map((body) => `"${md5(body)}"`),
    );
    // Page by page, the pages cut a.txt and d.txt, and resume where they stopped; a page the rest of a
    // key fills exactly (one at a time) is truncated still when keys follow.
    for (const MaxKeys of [1, 2, 3]) {
      const paged: string[] = [];
      let markers: Partial<ListObjectVersionsCommandInput> = {};
      for (let page = 0; page < 10; page++) {
        const answer = await list({ MaxKeys, ...markers });
        expect(answer.Versions?.length ?? 0).toBeLessThanOrEqual(MaxKeys);
        paged.push(...(answer.Versions ?? []).map((v) => v.VersionId!));
        if (!answer.IsTruncated) break;
        markers = { KeyMarker: answer.NextKeyMarker, VersionIdMarker: answer.NextVersionIdMarker };
      }
      expect(paged).toEqual(all.Versions?.map((v) => v.VersionId));
    }
    const filled = await list({
      MaxKeys: 1,
      KeyMarker: 'a.txt',
      VersionIdMarker: all.Versions![1]!.VersionId,
    });
    expect(filled.Versions?.map((v) => v.VersionId)).toEqual([all.Versions![2]!.VersionId]);
    expect(filled).toMatchObject({
      IsTruncated: true,
      NextKeyMarker: 'a.txt',
      NextVersionIdMarker: all.Versions![2]!.VersionId,
    });
    // No room is an empty page, not truncated, as S3 answers max-keys=0, inside a key too.
    for (const markers of [{}, { KeyMarker: 'a.txt', VersionIdMarker: all.Versions![0]!.VersionId }]) {
      const none = await list({ MaxKeys: 0, ...markers });
      expect({ versions: none.Versions ?? [], truncated: none.IsTruncated }).toEqual({
        versions: [],
        truncated: false,
      });
    }
    // Rolled up at the delimiter, a folder is one common prefix.
    const rolled = await list({ Delimiter: '/', MaxKeys: 4 });
    expect(rolled.Versions?.map((v) => v.Key)).toEqual(['a.txt', 'a.txt', 'a.txt']);
    expect(rolled.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['b/']);
    expect(rolled.IsTruncated).toBe(true);
    const rest = await list({
      Delimiter: '/',
      KeyMarker: rolled.NextKeyMarker,
      VersionIdMarker: rolled.NextVersionIdMarker,
    });
    expect(rest.Versions?.map((v) => v.Key)).toEqual(['d.txt', 'd.txt']);
    expect(rest.CommonPrefixes ?? []).toEqual([]);
    const fromPrefix = await list({ Prefix: 'b/', Delimiter: '/', KeyMarker: 'b/' });
    expect(fromPrefix.Versions?.map((v) => v.Key)).toEqual(['b/c.txt']);
  });
});
