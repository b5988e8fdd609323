import { createHash, randomBytes } from 'node:crypto';
import { open, unlink } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { crc32 } from 'node:zlib';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LocalObjectStore } from '../../../src/infra/storage/local/store.ts';
import { storage } from '../../support/backends.ts';
import { drain } from '../../support/pipeline.ts';
import { type Bucket as S3Bucket, s3EndpointSuite } from '../../support/s3-endpoint.ts';

// The checksums GetObject and HeadObject answer under x-amz-checksum-mode: ENABLED, as the AWS SDK
// for JavaScript asks for them (GetObject by default) and validates a download against them.
const s3 = s3EndpointSuite();
const { coffer, clientFor } = s3;

interface Bucket extends S3Bucket {
  /** A client that sends a checksum only where S3 requires one (never on a PutObject). */
  unsummed: S3Client;
}

async function bucketWith(settings: Record<string, unknown> = {}): Promise<Bucket> {
  const bucket = await s3.bucketWith(settings);
  const unsummed = clientFor(...bucket.keys, undefined, { requestChecksumCalculation: 'WHEN_REQUIRED' });
  return { ...bucket, unsummed };
}

const base64Crc32 = (data: Buffer) => {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc32(data));
  return digest.toString('base64');
};
const base64Of = (algorithm: 'sha1' | 'sha256', data: Buffer) =>
  createHash(algorithm).update(data).digest('base64');

const bytesOf = async (body: unknown) =>
  Buffer.from(await (body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());

/** The checksums an answer carries, as the SDK reads them. */
const checksumsOf = (answer: {
  ChecksumCRC32?: string;
  ChecksumCRC32C?: string;
  ChecksumCRC64NVME?: string;
  ChecksumSHA1?: string;
  ChecksumSHA256?: string;
  ChecksumType?: string;
}) => ({
  ChecksumCRC32: answer.ChecksumCRC32,
  ChecksumCRC32C: answer.ChecksumCRC32C,
  ChecksumCRC64NVME: answer.ChecksumCRC64NVME,
  ChecksumSHA1: answer.ChecksumSHA1,
  ChecksumSHA256: answer.ChecksumSHA256,
  ChecksumType: answer.ChecksumType,
});

const none = checksumsOf({});

describe('object checksums (x-amz-checksum-mode)', () => {
  let bucket: Bucket;
  beforeAll(async () => {
    bucket = await bucketWith();
  });

  it("answers the CRC32 a PutObject sent and the object's SHA-256 on HeadObject and GetObject, asked", async () => {
    const { client, name } = bucket;
    const data = randomBytes(70_000);
    const expected = {
      ...none,
      ChecksumCRC32: base64Crc32(data),
      ChecksumSHA256: base64Of('sha256', data),
      ChecksumType: 'FULL_OBJECT',
    };
    // The SDK's default CRC32: in a header for a buffer, in an aws-chunked trailer for a stream.
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'sums/buffer', Body: data }));
    await client.send(
      new PutObjectCommand({
        Bucket: name,
        Key: 'sums/stream',
        Body: Readable.from([data.subarray(0, 1000), data.subarray(1000)]),
        ContentLength: data.length,
      }),
    );
    for (const Key of ['sums/buffer', 'sums/stream']) {
      const head = await client.send(new HeadObjectCommand({ Bucket: name, Key, ChecksumMode: 'ENABLED' }));
      expect(checksumsOf(head)).toEqual(expected);
      const got = await client.send(new GetObjectCommand({ Bucket: name, Key, ChecksumMode: 'ENABLED' }));
      expect(checksumsOf(got)).toEqual(expected);
      expect((await bytesOf(got.Body)).equals(data)).toBe(true);
      // Not asked, none.
      expect(checksumsOf(await client.send(new HeadObjectCommand({ Bucket: name, Key })))).toEqual(none);
    }
    // A range, whose bytes the object's checksums do not cover, answers none; so does a part read
    // only where the part is not the whole object (see the multipart case).
    const range = await client.send(
      new GetObjectCommand({
        Bucket: name,
        Key: 'sums/buffer',
        Range: 'bytes=10-99',
        ChecksumMode: 'ENABLED',
      }),
    );
    expect(checksumsOf(range)).toEqual(none);
    expect((await bytesOf(range.Body)).equals(data.subarray(10, 100))).toBe(true);
    const whole = await client.send(
      new GetObjectCommand({ Bucket: name, Key: 'sums/buffer', PartNumber: 1, ChecksumMode: 'ENABLED' }),
    );
    expect(checksumsOf(whole)).toEqual(expected);
    expect((await bytesOf(whole.Body)).equals(data)).toBe(true);
  });

  it('replaces the checksum with the content: a PutObject sending none leaves the SHA-256 alone', async () => {
    const { client, unsummed, name } = bucket;
    const first = Buffer.from('first bytes');
    const second = Buffer.from('second bytes');
    await client.send(
      new PutObjectCommand({ Bucket: name, Key: 'sums/replaced', Body: first, ChecksumAlgorithm: 'SHA1' }),
    );
    const head = () =>
      client.send(new HeadObjectCommand({ Bucket: name, Key: 'sums/replaced', ChecksumMode: 'ENABLED' }));
    expect(checksumsOf(await head())).toMatchObject({
      ChecksumSHA1: base64Of('sha1', first),
      ChecksumSHA256: base64Of('sha256', first),
    });
    await unsummed.send(new PutObjectCommand({ Bucket: name, Key: 'sums/replaced', Body: second }));
    expect(checksumsOf(await head())).toEqual({
      ...none,
      ChecksumSHA256: base64Of('sha256', second),
      ChecksumType: 'FULL_OBJECT',
    });
  });

  it("copies a source's checksum with its bytes, or computes the algorithm the copy asks for", async () => {
    const { client, name } = bucket;
    const data = Buffer.from('bytes copied as they are');
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'sums/source', Body: data }));
    const copied = await client.send(
      new CopyObjectCommand({ Bucket: name, Key: 'sums/copy', CopySource: `${name}/sums/source` }),
    );
    expect(copied.CopyObjectResult?.ChecksumCRC32).toBe(base64Crc32(data));
    const head = await client.send(
      new HeadObjectCommand({ Bucket: name, Key: 'sums/copy', ChecksumMode: 'ENABLED' }),
    );
    expect(checksumsOf(head)).toEqual({
      ...none,
      ChecksumCRC32: base64Crc32(data),
      ChecksumSHA256: base64Of('sha256', data),
      ChecksumType: 'FULL_OBJECT',
    });
    const asked = await client.send(
      new CopyObjectCommand({
        Bucket: name,
        Key: 'sums/copy-sha1',
        CopySource: `${name}/sums/source`,
        ChecksumAlgorithm: 'SHA1',
      }),
    );
    expect(asked.CopyObjectResult).toMatchObject({
      ChecksumSHA1: base64Of('sha1', data),
      ChecksumType: 'FULL_OBJECT',
    });
    const headAsked = await client.send(
      new HeadObjectCommand({ Bucket: name, Key: 'sums/copy-sha1', ChecksumMode: 'ENABLED' }),
    );
    expect(checksumsOf(headAsked)).toEqual({
      ...none,
      ChecksumSHA1: base64Of('sha1', data),
      ChecksumSHA256: base64Of('sha256', data),
      ChecksumType: 'FULL_OBJECT',
    });
    await expect(
      client.send(
        new CopyObjectCommand({
          Bucket: name,
          Key: 'sums/copy-md4',
          CopySource: `${name}/sums/source`,
          ChecksumAlgorithm: 'MD4' as 'SHA1',
        }),
      ),
    ).rejects.toMatchObject({ name: 'InvalidRequest', $metadata: { httpStatusCode: 400 } });
  });

  it("answers a version's own checksums for the version read", async () => {
    const { client, unsummed, name } = await bucketWith({ versioning_enabled: true });
    const first = Buffer.from('version one');
    const second = Buffer.from('version two, sent without a checksum');
    const one = await client.send(new PutObjectCommand({ Bucket: name, Key: 'versioned', Body: first }));
    await unsummed.send(new PutObjectCommand({ Bucket: name, Key: 'versioned', Body: second }));
    const read = (VersionId?: string) =>
      client.send(
        new GetObjectCommand({ Bucket: name, Key: 'versioned', VersionId, ChecksumMode: 'ENABLED' }),
      );
    const old = await read(one.VersionId);
    expect(checksumsOf(old)).toEqual({
      ...none,
      ChecksumCRC32: base64Crc32(first),
      ChecksumSHA256: base64Of('sha256', first),
      ChecksumType: 'FULL_OBJECT',
    });
    expect((await bytesOf(old.Body)).equals(first)).toBe(true);
    expect(checksumsOf(await read())).toEqual({
      ...none,
      ChecksumSHA256: base64Of('sha256', second),
      ChecksumType: 'FULL_OBJECT',
    });
  });

  it('answers the SHA-256 of an object assembled from parts, and nothing for one of its several parts', async () => {
    const { client, name } = bucket;
    const parts = [randomBytes(5 * 1024 * 1024), randomBytes(1000)];
    const data = Buffer.concat(parts);
    const Key = 'sums/parts';
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key }));
    const uploaded = [];
    for (const [index, Body] of parts.entries()) {
      const part = await client.send(
        new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: index + 1, Body }),
      );
      uploaded.push({ PartNumber: index + 1, ETag: part.ETag });
    }
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key,
        UploadId,
        MultipartUpload: { Parts: uploaded },
      }),
    );
    // Where the store does not hash parts as they are assembled, the pipeline reads the object for it.
    await drain(coffer.services.pipeline);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key, ChecksumMode: 'ENABLED' }));
    expect(checksumsOf(got)).toEqual({
      ...none,
      ChecksumSHA256: base64Of('sha256', data),
      ChecksumType: 'FULL_OBJECT',
    });
    expect((await bytesOf(got.Body)).equals(data)).toBe(true);
    // The test S3 server (radosgw) ignores partNumber: there every object is one part, itself.
    if (storage === 's3') return;
    const part = await client.send(
      new GetObjectCommand({ Bucket: name, Key, PartNumber: 2, ChecksumMode: 'ENABLED' }),
    );
    expect(checksumsOf(part)).toEqual(none);
    expect((await bytesOf(part.Body)).equals(parts[1]!)).toBe(true);
    // Nor where the store places the part without counting the parts, as an S3-compatible one that
    // sends no x-amz-mp-parts-count does: the part is not the object.
    const { store } = coffer.services;
    const headPart = store.headPart;
    store.headPart = async (...args: Parameters<typeof store.headPart>) => {
      const found = await headPart.apply(store, args);
      return found && { ...found, partsCount: undefined };
    };
    try {
      for (const [index, bytes] of parts.entries()) {
        const uncounted = await client.send(
          new GetObjectCommand({ Bucket: name, Key, PartNumber: index + 1, ChecksumMode: 'ENABLED' }),
        );
        expect(checksumsOf(uncounted)).toEqual(none);
        expect((await bytesOf(uncounted.Body)).equals(bytes)).toBe(true);
      }
    } finally {
      store.headPart = headPart;
    }
  });

  it.skipIf(storage === 's3')(
    "fails the SDK's validation of a download whose bytes changed behind Coffer's back",
    async () => {
      const { client, project, name } = bucket;
      const data = randomBytes(100_000);
      await client.send(new PutObjectCommand({ Bucket: name, Key: 'sums/altered', Body: data }));
      const [file] = (await project.call('GET', '/files?q=altered')).body.items;
      const own = await (coffer.services.store as LocalObjectStore).ownFile(file.storage_key);
      const handle = await open(own!.path, 'r+');
      try {
        await handle.write(Buffer.from([data[500]! ^ 0xff]), 0, 1, 500);
      } finally {
        await handle.close();
      }
      // The SDK asks for the checksums of a GetObject by default, and checks the body against them.
      const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'sums/altered' }));
      expect(got.ChecksumSHA256).toBe(base64Of('sha256', data));
      await expect(bytesOf(got.Body)).rejects.toThrow(/Checksum mismatch/);
      // A range answers no checksum, so nothing can be checked.
      const range = await client.send(
        new GetObjectCommand({ Bucket: name, Key: 'sums/altered', Range: 'bytes=0-999' }),
      );
      expect((await bytesOf(range.Body)).length).toBe(1000);
    },
  );

  it.skipIf(storage === 's3')(
    'answers the error of a read whose bytes are gone from the local store without the checksums it had set',
    async () => {
      const { client, project, name } = bucket;
      const Key = 'sums/lost';
      await client.send(new PutObjectCommand({ Bucket: name, Key, Body: randomBytes(100_000) }));
      const url = await getSignedUrl(
        client,
        new GetObjectCommand({ Bucket: name, Key, ChecksumMode: 'ENABLED' }),
      );
      const checksumHeadersOf = (answer: Response) =>
        [...answer.headers.keys()].filter((header) => header.startsWith('x-amz-checksum-'));
      const read = await fetch(url);
      await read.arrayBuffer();
      expect(checksumHeadersOf(read)).toContain('x-amz-checksum-crc32');
      const [file] = (await project.call('GET', '/files?q=lost')).body.items;
      const own = await (coffer.services.store as LocalObjectStore).ownFile(file.storage_key);
      await unlink(own!.path);
      // The checksums were set before the bytes were found missing: the error document goes without them.
      const failed = await fetch(url);
      expect(failed.status).toBe(500);
      expect(await failed.text()).toContain('<Code>InternalError</Code>');
      expect(checksumHeadersOf(failed)).toEqual([]);
      // The SDK, checking what it reads against the checksums it asked for, reads the error.
      await expect(
        client.send(new GetObjectCommand({ Bucket: name, Key, ChecksumMode: 'ENABLED' })),
      ).rejects.toMatchObject({ name: 'InternalError', $metadata: { httpStatusCode: 500 } });
    },
  );
});
