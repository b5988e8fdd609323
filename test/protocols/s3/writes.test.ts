import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { crc32 as zlibCrc32 } from 'node:zlib';
import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { madeBeforeAll } from '../../support/coffer.ts';
import { Exchange } from '../../support/exchange.ts';
import { md5, refusal, s3EndpointSuite, signedHeaders, text } from '../../support/s3-endpoint.ts';

// Object writes through the S3 endpoint, as the current AWS SDK for JavaScript talks to it (default
// checksums: stream bodies go aws-chunked with a trailing CRC32): a PutObject stored as a Coffer file,
// the checksums answered, the size S3 allows, the encryption and object locks Coffer does not keep;
// every result is checked through Coffer's own REST API too.
const { coffer, bucketWith, clientFor } = s3EndpointSuite();

/**
 * The answer to a PUT of `url` that declares `length` bytes and sends only a few: what the server
 * says of the declared length before it reads the body.
 */
function putDeclaring(url: string, length: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const sent = httpRequest(
      url,
      { method: 'PUT', headers: { 'content-length': String(length) } },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          resolve({ status: answer.statusCode!, body: Buffer.concat(chunks).toString('utf8') });
          sent.destroy();
        });
      },
    );
    sent.on('error', reject);
    sent.write('abc');
  });
}

describe('the S3 endpoint', () => {
  const bucket = madeBeforeAll(() => bucketWith());

  it('reads through the rest of a PutObject refused mid-body: a request sent after it on its connection is answered', async () => {
    const path = `/s3/${bucket.name}/refused-midway.bin`;
    const length = 1024 * 1024;
    const headers = await signedHeaders(coffer, bucket.keys, {
      method: 'PUT',
      path,
      headers: {
        'content-length': String(length),
        'content-encoding': 'aws-chunked',
        'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        'x-amz-decoded-content-length': String(length),
      },
    });
    const exchange = new Exchange(coffer.url, 'PUT', path, headers);
    // A body whose framing is broken from its first line: refused once that line is read.
    await exchange.write(Buffer.concat([Buffer.from('not a chunk size\r\n'), Buffer.alloc(1024)]));
    const refused = await exchange.next();
    expect(refused.status).toBe(400);
    // The rest, more than the server buffers, then the next request, as a keep-alive client sends them.
    void exchange
      .write(
        Buffer.concat([
          Buffer.alloc(length - 1024 - 'not a chunk size\r\n'.length),
          Buffer.from('GET /openapi.json HTTP/1.1\r\nhost: coffer\r\n\r\n'),
        ]),
      )
      .catch(() => undefined);
    const next = await exchange.nextWithin(10_000);
    exchange.close();
    expect(next?.status).toBe(200);
  });

  it('stores a streamed PutObject as a Coffer file: folders from the key, metadata, MD5 ETag', async () => {
    const { client, name, project } = bucket;
    const data = randomBytes(1024 * 1024 + 7);
    const put = await client.send(
      new PutObjectCommand({
        Bucket: name,
        Key: 'photos/2026/cat.bin',
        Body: Readable.from([data.subarray(0, 1000), data.subarray(1000)]),
        ContentLength: data.length,
        ContentType: 'application/octet-stream',
        Metadata: { camera: 'pinhole' },
      }),
    );
    expect(put.ETag).toBe(`"${md5(data)}"`);
    const listed = await project.call('GET', '/files?q=cat.bin');
    expect(listed.body.total).toBe(1);
    const file = listed.body.items[0];
    expect(file).toMatchObject({
      filename: 'cat.bin',
      status: 'ready',
      size_bytes: data.length,
      metadata: { camera: 'pinhole' },
      checksum_sha256: createHash('sha256').update(data).digest('hex'),
    });
    const folder = await project.call('GET', `/folders/${file.folder_id}`);
    expect(folder.body.path).toBe('photos/2026');

    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'photos/2026/cat.bin' }));
    expect(got.ETag).toBe(`"${md5(data)}"`);
    expect(got.Metadata).toEqual({ camera: 'pinhole' });
    expect(got.ContentLength).toBe(data.length);
    expect((await text(got.Body)).equals(data)).toBe(true);
  });

  it('answers a PutObject and an UploadPart with the checksum their body was verified against, as S3 does', async () => {
    const { client, name } = bucket;
    const data = Buffer.from('checked bytes');
    const crc32 = Buffer.alloc(4);
    crc32.writeUInt32BE(zlibCrc32(data));
    const sha256 = createHash('sha256').update(data).digest('base64');
    // A stream goes aws-chunked with a trailing CRC32; a buffer with an x-amz-checksum-sha256 header.
    const streamed = await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'sums/a', Body: Readable.from([data]), ContentLength: 13 }),
    );
    expect(streamed.ChecksumCRC32).toBe(crc32.toString('base64'));
    const buffered = await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'sums/b', Body: data, ChecksumAlgorithm: 'SHA256' }),
    );
    expect([buffered.ChecksumSHA256, buffered.ChecksumCRC32]).toEqual([sha256, undefined]);
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'sums/c' }));
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'sums/c', UploadId, PartNumber: 1, Body: data }),
    );
    expect(part.ChecksumCRC32).toBe(crc32.toString('base64'));
    await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key: 'sums/c', UploadId }));
    // Without a checksum, none is answered.
    const plain = clientFor(...bucket.keys, undefined, { requestChecksumCalculation: 'WHEN_REQUIRED' });
    const unsummed = await plain.send(new PutObjectCommand({ Bucket: name, Key: 'sums/d', Body: data }));
    expect(unsummed.ChecksumCRC32).toBeUndefined();
  });

  it('refuses a PutObject or UploadPart past 5 GiB with EntityTooLarge, as S3 does, before its body', async () => {
    const { client, name } = await bucketWith();
    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket: name, Key: 'big.bin' }),
    );
    const tooLarge = 5 * 1024 ** 3 + 1;
    for (const url of [
      await getSignedUrl(client, new PutObjectCommand({ Bucket: name, Key: 'big.bin' })),
      await getSignedUrl(
        client,
        new UploadPartCommand({ Bucket: name, Key: 'big.bin', UploadId, PartNumber: 1 }),
      ),
    ]) {
      const answer = await putDeclaring(url, tooLarge);
      expect(answer.status).toBe(400);
      expect(answer.body).toContain('<Code>EntityTooLarge</Code>');
      expect(answer.body).toContain(`<ProposedSize>${tooLarge}</ProposedSize>`);
      expect(answer.body).toContain(`<MaxSizeAllowed>${5 * 1024 ** 3}</MaxSizeAllowed>`);
    }
  });

  it('refuses a write asking for server-side encryption or an object lock with 501, storing nothing', async () => {
    const { client, name } = bucket;
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'sse/source.txt', Body: 'source' }));
    const customerKey = randomBytes(32).toString('base64');
    const asks = [
      { ServerSideEncryption: 'aws:kms' as const },
      { ServerSideEncryption: 'AES256' as const },
      {
        SSECustomerAlgorithm: 'AES256',
        SSECustomerKey: customerKey,
        SSECustomerKeyMD5: createHash('md5').update(Buffer.from(customerKey, 'base64')).digest('base64'),
      },
      { ObjectLockMode: 'COMPLIANCE' as const, ObjectLockRetainUntilDate: new Date(Date.now() + 86_400_000) },
      { ObjectLockLegalHoldStatus: 'ON' as const },
    ];
    for (const [index, ask] of asks.entries()) {
      const Key = `sse/${index}.txt`;
      for (const send of [
        () => client.send(new PutObjectCommand({ Bucket: name, Key, Body: 'secret', ...ask })),
        () =>
          client.send(
            new CopyObjectCommand({ Bucket: name, Key, CopySource: `${name}/sse/source.txt`, ...ask }),
          ),
        () => client.send(new CreateMultipartUploadCommand({ Bucket: name, Key, ...ask })),
      ]) {
        expect(await refusal(send())).toEqual({ code: 'NotImplemented', status: 501 });
      }
      expect(await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key })))).toMatchObject({
        status: 404,
      });
    }
    const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: name, Prefix: 'sse/' }));
    expect(uploads.Uploads ?? []).toEqual([]);
  });

  it('lets a write through whose bucket key or legal hold header asks for none; asking for one is 501', async () => {
    const { client, name } = bucket;
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'sse-off/source.txt', Body: 'source' }));
    const writes = (Key: string, ask: object) => [
      () => client.send(new PutObjectCommand({ Bucket: name, Key, Body: 'plain', ...ask })),
      () =>
        client.send(
          new CopyObjectCommand({ Bucket: name, Key, CopySource: `${name}/sse-off/source.txt`, ...ask }),
        ),
      async () => {
        const { UploadId } = await client.send(
          new CreateMultipartUploadCommand({ Bucket: name, Key, ...ask }),
        );
        await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key, UploadId }));
      },
    ];
    const none = [
      { BucketKeyEnabled: false },
      { ObjectLockLegalHoldStatus: 'OFF' as const },
      { ObjectLockLegalHoldStatus: 'off' as 'OFF' },
      { BucketKeyEnabled: false, ObjectLockLegalHoldStatus: 'Off' as 'OFF' },
    ];
    for (const [index, ask] of none.entries()) {
      for (const write of writes(`sse-off/${index}.txt`, ask)) await write();
      expect(
        await client.send(new GetObjectCommand({ Bucket: name, Key: `sse-off/${index}.txt` })),
      ).toMatchObject({ ContentLength: 6 });
    }
    const some = [
      { BucketKeyEnabled: true },
      { ObjectLockLegalHoldStatus: 'ON' as const, BucketKeyEnabled: false },
      { ServerSideEncryption: 'aws:kms' as const, BucketKeyEnabled: false },
      { ObjectLockMode: 'GOVERNANCE' as const, ObjectLockLegalHoldStatus: 'OFF' as const },
    ];
    for (const [index, ask] of some.entries()) {
      for (const write of writes(`sse-on/${index}.txt`, ask)) {
        expect(await refusal(write())).toEqual({ code: 'NotImplemented', status: 501 });
      }
    }
  });
});
