import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  type CopyObjectCommandInput,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { madeBeforeAll } from '../../support/coffer.ts';
import { md5, refusal, s3EndpointSuite } from '../../support/s3-endpoint.ts';

// The standard headers S3 stores with an object (Cache-Control, Content-Disposition, Content-Encoding,
// Content-Language, Expires), through the S3 endpoint as the current AWS SDK for JavaScript sends and
// reads them.
const { bucketWith } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  const bucket = madeBeforeAll(() => bucketWith());

  describe('the standard headers S3 stores with an object', () => {
    const stored = {
      CacheControl: 'max-age=60',
      ContentDisposition: 'attachment; filename="report.txt"',
      ContentEncoding: 'gzip',
      ContentLanguage: 'fr-CA',
      Expires: new Date('2030-01-01T00:00:00Z'),
    };
    const answered = {
      CacheControl: 'max-age=60',
      ContentDisposition: 'attachment; filename="report.txt"',
      ContentEncoding: 'gzip',
      ContentLanguage: 'fr-CA',
      ExpiresString: 'Tue, 01 Jan 2030 00:00:00 GMT',
    };
    const none = {
      CacheControl: undefined,
      ContentDisposition: undefined,
      ContentEncoding: undefined,
      ContentLanguage: undefined,
      ExpiresString: undefined,
    };
    const headersOf = async (client: S3Client, Bucket: string, Key: string, VersionId?: string) => {
      const head = await client.send(new HeadObjectCommand({ Bucket, Key, VersionId }));
      const got = await client.send(new GetObjectCommand({ Bucket, Key, VersionId }));
      await got.Body?.transformToByteArray();
      const pick = (answer: typeof head | typeof got) => ({
        CacheControl: answer.CacheControl,
        ContentDisposition: answer.ContentDisposition,
        ContentEncoding: answer.ContentEncoding,
        ContentLanguage: answer.ContentLanguage,
        ExpiresString: answer.ExpiresString,
      });
      expect(pick(got)).toEqual(pick(head));
      return pick(head);
    };

    it('answers on GetObject and HeadObject the headers a PutObject sent; a PutObject without them clears them', async () => {
      const { client, name, project } = bucket;
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'hdrs/put.txt', Body: 'body', ...stored }));
      expect(await headersOf(client, name, 'hdrs/put.txt')).toEqual(answered);
      // A 304 tells a cache how long what it holds stays fresh, as the 200 did (RFC 9110 §15.4.5).
      const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: name, Key: 'hdrs/put.txt' }), {
        expiresIn: 60,
      });
      const revalidated = await fetch(url, { headers: { 'if-none-match': `"${md5('body')}"` } });
      expect(revalidated.status).toBe(304);
      expect(revalidated.headers.get('cache-control')).toBe('max-age=60');
      expect(revalidated.headers.get('expires')).toBe('Tue, 01 Jan 2030 00:00:00 GMT');
      expect(revalidated.headers.get('content-encoding')).toBeNull();
      // A streamed body goes aws-chunked: that coding frames the request, it is not the object's.
      const data = randomBytes(70_000);
      for (const ContentEncoding of ['gzip', undefined]) {
        await client.send(
          new PutObjectCommand({
            Bucket: name,
            Key: 'hdrs/streamed.bin',
            Body: Readable.from([data]),
            ContentLength: data.length,
            ContentEncoding,
          }),
        );
        expect(await headersOf(client, name, 'hdrs/streamed.bin')).toEqual(
          ContentEncoding ? { ...none, ContentEncoding } : none,
        );
      }
      // S3 replaces an object whole: new content without them has none.
      await client.send(
        new PutObjectCommand({ Bucket: name, Key: 'hdrs/put.txt', Body: 'again', CacheControl: 'no-store' }),
      );
      expect(await headersOf(client, name, 'hdrs/put.txt')).toEqual({ ...none, CacheControl: 'no-store' });
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'hdrs/put.txt', Body: 'bare' }));
      expect(await headersOf(client, name, 'hdrs/put.txt')).toEqual(none);
      // They are S3's: the REST API shows no more of the file than before.
      const [file] = (await project.call('GET', '/files?q=put.txt')).body.items;
      expect(Object.keys(file)).not.toContain('http_headers');
    });

    it('refuses a header value past 2 KiB with 400 InvalidArgument, storing nothing', async () => {
      const { client, name } = bucket;
      const long = 'x'.repeat(2049);
      for (const send of [
        () =>
          client.send(
            new PutObjectCommand({ Bucket: name, Key: 'hdrs/long.txt', Body: 'b', CacheControl: long }),
          ),
        () =>
          client.send(
            new CreateMultipartUploadCommand({
              Bucket: name,
              Key: 'hdrs/long.txt',
              ContentDisposition: long,
            }),
          ),
      ]) {
        expect(await refusal(send())).toEqual({ code: 'InvalidArgument', status: 400 });
      }
      expect(
        await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key: 'hdrs/long.txt' }))),
      ).toMatchObject({
        status: 404,
      });
    });

    it('stores the headers of a CreateMultipartUpload with its content, at completion', async () => {
      const { client, name } = bucket;
      await client.send(
        new PutObjectCommand({
          Bucket: name,
          Key: 'hdrs/parts.txt',
          Body: 'before',
          CacheControl: 'no-cache',
        }),
      );
      for (const Key of ['hdrs/parts.txt', 'hdrs/new-parts.txt']) {
        const { UploadId } = await client.send(
          new CreateMultipartUploadCommand({ Bucket: name, Key, ...stored }),
        );
        const part = await client.send(
          new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: 'parts' }),
        );
        // The object there keeps its own until the upload completes.
        if (Key === 'hdrs/parts.txt') {
          expect(await headersOf(client, name, Key)).toEqual({ ...none, CacheControl: 'no-cache' });
        }
        await client.send(
          new CompleteMultipartUploadCommand({
            Bucket: name,
            Key,
            UploadId,
            MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
          }),
        );
        expect(await headersOf(client, name, Key)).toEqual(answered);
      }
    });

    it("gives a copy its source's headers (COPY) or the request's (REPLACE)", async () => {
      const { client, name } = bucket;
      await client.send(
        new PutObjectCommand({ Bucket: name, Key: 'hdrs/src.txt', Body: 'source', ...stored }),
      );
      await client.send(
        new PutObjectCommand({ Bucket: name, Key: 'hdrs/dst.txt', Body: 'there', ContentLanguage: 'de' }),
      );
      const copy = (input: Partial<CopyObjectCommandInput>) =>
        client.send(
          new CopyObjectCommand({
            Bucket: name,
            Key: 'hdrs/dst.txt',
            CopySource: `${name}/hdrs/src.txt`,
            ...input,
          }),
        );
      // COPY ignores the request's.
      await copy({ CacheControl: 'no-store' });
      expect(await headersOf(client, name, 'hdrs/dst.txt')).toEqual(answered);
      await copy({ MetadataDirective: 'REPLACE', CacheControl: 'no-store', ContentLanguage: 'en' });
      expect(await headersOf(client, name, 'hdrs/dst.txt')).toEqual({
        ...none,
        CacheControl: 'no-store',
        ContentLanguage: 'en',
      });
      await copy({ MetadataDirective: 'REPLACE' });
      expect(await headersOf(client, name, 'hdrs/dst.txt')).toEqual(none);
    });

    it('keeps the headers of each version with it', async () => {
      const { client, name } = await bucketWith({ versioning_enabled: true });
      const first = await client.send(
        new PutObjectCommand({ Bucket: name, Key: 'v.txt', Body: 'first', ...stored }),
      );
      const second = await client.send(
        new PutObjectCommand({ Bucket: name, Key: 'v.txt', Body: 'second', CacheControl: 'no-store' }),
      );
      const third = await client.send(new PutObjectCommand({ Bucket: name, Key: 'v.txt', Body: 'third' }));
      expect(await headersOf(client, name, 'v.txt', first.VersionId)).toEqual(answered);
      expect(await headersOf(client, name, 'v.txt', second.VersionId)).toEqual({
        ...none,
        CacheControl: 'no-store',
      });
      expect(await headersOf(client, name, 'v.txt', third.VersionId)).toEqual(none);
      expect(await headersOf(client, name, 'v.txt')).toEqual(none);
      // Copying a version onto its key restores it, its headers with it.
      await client.send(
        new CopyObjectCommand({
          Bucket: name,
          Key: 'v.txt',
          CopySource: `${name}/v.txt?versionId=${first.VersionId}`,
        }),
      );
      expect(await headersOf(client, name, 'v.txt')).toEqual(answered);
    });

    it("answers a presigned GET with the object's headers, its response-* parameters over them", async () => {
      const { client, name } = bucket;
      const text = 'a compressed page';
      await client.send(
        new PutObjectCommand({
          Bucket: name,
          Key: 'hdrs/page.html',
          Body: gzipSync(text),
          ContentType: 'text/html',
          ...stored,
        }),
      );
      const plain = await fetch(
        await getSignedUrl(client, new GetObjectCommand({ Bucket: name, Key: 'hdrs/page.html' }), {
          expiresIn: 60,
        }),
      );
      // fetch decodes what the object's Content-Encoding says it is.
      expect(await plain.text()).toBe(text);
      expect(plain.headers.get('cache-control')).toBe('max-age=60');
      expect(plain.headers.get('content-encoding')).toBe('gzip');
      const url = await getSignedUrl(
        client,
        new GetObjectCommand({
          Bucket: name,
          Key: 'hdrs/page.html',
          ResponseCacheControl: 'no-cache',
          ResponseContentDisposition: 'inline',
          ResponseContentEncoding: 'identity',
          ResponseContentLanguage: 'en',
          ResponseExpires: new Date('2031-01-01T00:00:00Z'),
        }),
        { expiresIn: 60 },
      );
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expect(
        Object.fromEntries(
          ['cache-control', 'content-disposition', 'content-encoding', 'content-language', 'expires'].map(
            (header) => [header, response.headers.get(header)],
          ),
        ),
      ).toEqual({
        'cache-control': 'no-cache',
        'content-disposition': 'inline',
        'content-encoding': 'identity',
        'content-language': 'en',
        expires: 'Wed, 01 Jan 2031 00:00:00 GMT',
      });
      expect(Buffer.from(await response.arrayBuffer())).toEqual(gzipSync(text));
    });
  });
});
