import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  ListPartsCommand,
  PutObjectCommand,
  type PutObjectCommandInput,
  type S3Client,
  S3ServiceException,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { s3EndpointSuite } from '../../support/s3-endpoint.ts';

// The error documents of what a request names that is not there, and of a condition that did not
// hold: each names it in the element S3 adds (BucketName, Key, UploadId, VersionId, Condition), after
// the message, and the AWS SDK still reads the refusal by its code.
const { bucketWith } = s3EndpointSuite();

interface Refusal {
  /** The code the SDK read, its status, and the elements of the error document it came with. */
  code: string;
  status: number | undefined;
  elements: Record<string, string>;
  /** The names of the document's elements, in order. */
  order: string[];
}

const unescaped = (text: string) =>
  text
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&quot;', '"')
    .replaceAll('&apos;', "'")
    .replaceAll('&amp;', '&');

/** A step of the SDK's middleware, as the deserializer calls it: the answer, not yet read. */
type Handler = (args: object) => Promise<{ response: { statusCode: number; body?: unknown } }>;

/**
 * Sends `command` as the SDK signs it, and answers how it was refused: the SDK's reading, and the
 * error document as the endpoint sent it (read off the wire before the SDK parses it).
 */
async function refusalOf(client: S3Client, command: { middlewareStack: unknown }): Promise<Refusal> {
  let document = '';
  const stack = command.middlewareStack as {
    add(middleware: (next: Handler) => Handler, options: { step: 'deserialize'; priority: 'low' }): void;
  };
  stack.add(
    (next) => async (args) => {
      const result = await next(args);
      const { response } = result;
      if (response.statusCode >= 300 && response.body) {
        const chunks: Buffer[] = [];
        for await (const chunk of response.body as Readable) chunks.push(Buffer.from(chunk));
        const bytes = Buffer.concat(chunks);
        document = bytes.toString('utf8');
        response.body = Readable.from([bytes]);
      }
      return result;
    },
    // Below the SDK's deserializer: the answer as it arrived.
    { step: 'deserialize', priority: 'low' },
  );
  try {
    await client.send(command as never);
  } catch (error) {
    if (!(error instanceof S3ServiceException)) throw error;
    const inner = /<Error>([\s\S]*)<\/Error>/.exec(document)?.[1] ?? '';
    const pairs = [...inner.matchAll(/<([A-Za-z]+)>([^<]*)<\/\1>/g)].map(
      ([, name, value]) => [name!, unescaped(value!)] as const,
    );
    return {
      code: error.name,
      status: error.$metadata.httpStatusCode,
      elements: Object.fromEntries(pairs),
      order: pairs.map(([name]) => name),
    };
  }
  throw new Error('the request was not refused');
}

/** A PutObject of a small text object at `Key`, with `options` (its conditions…). */
const putText = (Bucket: string, Key: string, options: Partial<PutObjectCommandInput> = {}) =>
  new PutObjectCommand({ Bucket, Key, Body: 'text', ContentType: 'text/plain', ...options });

/** A version id of the form Coffer makes, that no version has. */
const UNKNOWN_VERSION = 'ver_01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe('an error document of S3', () => {
  it('names a missing key in <Key>, after the message, as S3 does', async () => {
    const { client, name } = await bucketWith();
    const Key = 'reports/q3 & "final".txt';
    const missing = await refusalOf(client, new GetObjectCommand({ Bucket: name, Key }));
    expect(missing).toMatchObject({ code: 'NoSuchKey', status: 404, elements: { Key } });
    expect(missing.order.slice(0, 3)).toEqual(['Code', 'Message', 'Key']);
    expect(missing.order.slice(-2)).toEqual(['RequestId', 'HostId']);
    expect(await refusalOf(client, new GetObjectTaggingCommand({ Bucket: name, Key }))).toMatchObject({
      code: 'NoSuchKey',
      elements: { Key },
    });
    // A folder key is a key too.
    expect(await refusalOf(client, new GetObjectCommand({ Bucket: name, Key: 'none/' }))).toMatchObject({
      code: 'NoSuchKey',
      elements: { Key: 'none/' },
    });
    // A copy names the source it did not find, and If-Match over no object the key written.
    await client.send(putText(name, 'here.txt'));
    expect(
      await refusalOf(
        client,
        new CopyObjectCommand({ Bucket: name, Key: 'here.txt', CopySource: `${name}/gone.txt` }),
      ),
    ).toMatchObject({ code: 'NoSuchKey', status: 404, elements: { Key: 'gone.txt' } });
    expect(await refusalOf(client, putText(name, 'absent.txt', { IfMatch: '"abc"' }))).toMatchObject({
      code: 'NoSuchKey',
      status: 404,
      elements: { Key: 'absent.txt' },
    });
  });

  it('names a bucket that is not the caller’s in <BucketName>, a copy’s source bucket too', async () => {
    const { client, name } = await bucketWith();
    const other = `${name}-elsewhere`;
    const missing = await refusalOf(client, new GetObjectCommand({ Bucket: other, Key: 'a.txt' }));
    expect(missing).toMatchObject({ code: 'NoSuchBucket', status: 404, elements: { BucketName: other } });
    expect(missing.order.slice(0, 3)).toEqual(['Code', 'Message', 'BucketName']);
    expect(
      await refusalOf(
        client,
        new CopyObjectCommand({ Bucket: name, Key: 'a.txt', CopySource: `${other}/source.txt` }),
      ),
    ).toMatchObject({ code: 'NoSuchBucket', status: 404, elements: { BucketName: other } });
  });

  it('names an unknown multipart upload in <UploadId>, whatever the call on it', async () => {
    const { client, name } = await bucketWith();
    const Key = 'big.bin';
    const UploadId = 'no-such-upload-id';
    const calls = [
      new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: 'x' }),
      new ListPartsCommand({ Bucket: name, Key, UploadId }),
      new AbortMultipartUploadCommand({ Bucket: name, Key, UploadId }),
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key,
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: '"abc"' }] },
      }),
    ];
    for (const call of calls) {
      const refused = await refusalOf(client, call);
      expect(refused, call.constructor.name).toMatchObject({
        code: 'NoSuchUpload',
        status: 404,
        elements: { UploadId },
      });
      expect(refused.order.slice(0, 3), call.constructor.name).toEqual(['Code', 'Message', 'UploadId']);
    }
    // An upload that ended is named alike.
    const started = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key }));
    await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key, UploadId: started.UploadId }));
    expect(
      await refusalOf(client, new ListPartsCommand({ Bucket: name, Key, UploadId: started.UploadId })),
    ).toMatchObject({ code: 'NoSuchUpload', elements: { UploadId: started.UploadId } });
  });

  it('names an unknown version by <Key> and <VersionId>, on a read, a delete and a copy', async () => {
    const { client, name } = await bucketWith({ versioning_enabled: true });
    await client.send(putText(name, 'doc.txt'));
    const read = await refusalOf(
      client,
      new GetObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: UNKNOWN_VERSION }),
    );
    expect(read).toMatchObject({
      code: 'NoSuchVersion',
      status: 404,
      elements: { Key: 'doc.txt', VersionId: UNKNOWN_VERSION },
    });
    expect(read.order.slice(0, 4)).toEqual(['Code', 'Message', 'Key', 'VersionId']);
    expect(
      await refusalOf(
        client,
        new DeleteObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: UNKNOWN_VERSION }),
      ),
    ).toMatchObject({ code: 'NoSuchVersion', elements: { Key: 'doc.txt', VersionId: UNKNOWN_VERSION } });
    expect(
      await refusalOf(
        client,
        new CopyObjectCommand({
          Bucket: name,
          Key: 'copy.txt',
          CopySource: `${name}/doc.txt?versionId=${UNKNOWN_VERSION}`,
        }),
      ),
    ).toMatchObject({ code: 'NoSuchVersion', elements: { Key: 'doc.txt', VersionId: UNKNOWN_VERSION } });
    // A folder key has one version, "null".
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'dir/', Body: '' }));
    expect(
      await refusalOf(
        client,
        new GetObjectCommand({ Bucket: name, Key: 'dir/', VersionId: UNKNOWN_VERSION }),
      ),
    ).toMatchObject({ code: 'NoSuchVersion', elements: { Key: 'dir/', VersionId: UNKNOWN_VERSION } });
  });

  it('names the condition that did not hold in <Condition>, a copy source’s with its header’s prefix', async () => {
    const { client, name } = await bucketWith();
    const put = await client.send(putText(name, 'k.txt'));
    const failed = (Condition: string) => ({
      code: 'PreconditionFailed',
      status: 412,
      elements: { Condition },
    });
    const written = await refusalOf(client, putText(name, 'k.txt', { IfNoneMatch: '*' }));
    expect(written).toMatchObject(failed('If-None-Match'));
    expect(written.order.slice(0, 3)).toEqual(['Code', 'Message', 'Condition']);
    expect(await refusalOf(client, putText(name, 'k.txt', { IfMatch: '"0"' }))).toMatchObject(
      failed('If-Match'),
    );
    expect(
      await refusalOf(client, new GetObjectCommand({ Bucket: name, Key: 'k.txt', IfMatch: '"0"' })),
    ).toMatchObject(failed('If-Match'));
    const past = new Date(Date.now() - 86_400_000);
    expect(
      await refusalOf(client, new GetObjectCommand({ Bucket: name, Key: 'k.txt', IfUnmodifiedSince: past })),
    ).toMatchObject(failed('If-Unmodified-Since'));
    const source = `${name}/k.txt`;
    const copies = [
      [{ CopySourceIfMatch: '"0"' }, 'x-amz-copy-source-If-Match'],
      [{ CopySourceIfNoneMatch: put.ETag }, 'x-amz-copy-source-If-None-Match'],
      [{ CopySourceIfUnmodifiedSince: past }, 'x-amz-copy-source-If-Unmodified-Since'],
      [
        { CopySourceIfModifiedSince: new Date(Date.now() + 86_400_000) },
        'x-amz-copy-source-If-Modified-Since',
      ],
    ] as const;
    for (const [conditions, condition] of copies) {
      expect(
        await refusalOf(
          client,
          new CopyObjectCommand({ Bucket: name, Key: 'c.txt', CopySource: source, ...conditions }),
        ),
        condition,
      ).toMatchObject(failed(condition));
    }
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'm.txt' }));
    expect(
      await refusalOf(
        client,
        new UploadPartCopyCommand({
          Bucket: name,
          Key: 'm.txt',
          UploadId,
          PartNumber: 1,
          CopySource: source,
          CopySourceIfMatch: '"0"',
        }),
      ),
    ).toMatchObject(failed('x-amz-copy-source-If-Match'));
    // A completion over the key.
    const over = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'k.txt' }));
    const Key = 'k.txt';
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key, UploadId: over.UploadId, PartNumber: 1, Body: 'y' }),
    );
    const Parts = [{ PartNumber: 1, ETag: part.ETag }];
    expect(
      await refusalOf(
        client,
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key,
          UploadId: over.UploadId,
          IfNoneMatch: '*',
          MultipartUpload: { Parts },
        }),
      ),
    ).toMatchObject(failed('If-None-Match'));
  });

  it('refuses a version id no version can have with 400 InvalidArgument, naming it, before looking for the object', async () => {
    for (const versioning_enabled of [true, false]) {
      const { client, name } = await bucketWith({ versioning_enabled });
      const label = `versioning ${versioning_enabled}`;
      await client.send(putText(name, 'doc.txt'));
      const invalid = (VersionId: string, message = 'Invalid version id specified') => ({
        code: 'InvalidArgument',
        status: 400,
        elements: { Message: message, ArgumentName: 'versionId', ArgumentValue: VersionId },
      });
      // Neither `null` nor of the form of Coffer's ids (lower case is not), one S3 might make among them.
      const malformed = [
        'abc',
        'ver_unknown',
        'ver_01arz3ndektsv4rrffq69g5fav',
        '3HL4kqtJlcpXroDTDmJ+rmSpXd3dIb',
      ];
      for (const VersionId of malformed) {
        for (const Key of ['doc.txt', 'missing.txt', 'dir/']) {
          expect(
            await refusalOf(client, new GetObjectCommand({ Bucket: name, Key, VersionId })),
            `${label}: GetObject ${Key} ${VersionId}`,
          ).toMatchObject(invalid(VersionId));
        }
        expect(
          await refusalOf(client, new GetObjectTaggingCommand({ Bucket: name, Key: 'doc.txt', VersionId })),
          `${label}: GetObjectTagging ${VersionId}`,
        ).toMatchObject(invalid(VersionId));
        expect(
          await refusalOf(client, new DeleteObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId })),
          `${label}: DeleteObject ${VersionId}`,
        ).toMatchObject(invalid(VersionId));
        // A HEAD has no document: its status says it.
        expect(
          await refusalOf(client, new HeadObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId })),
          `${label}: HeadObject ${VersionId}`,
        ).toMatchObject({ status: 400 });
        // The version of a copy's source, CopyObject's and UploadPartCopy's.
        const CopySource = `${name}/doc.txt?versionId=${encodeURIComponent(VersionId)}`;
        const copySource = { code: 'InvalidArgument', elements: { Message: 'Invalid version id specified' } };
        expect(
          await refusalOf(client, new CopyObjectCommand({ Bucket: name, Key: 'copy.txt', CopySource })),
          `${label}: CopyObject ${VersionId}`,
        ).toMatchObject(copySource);
        const { UploadId } = await client.send(
          new CreateMultipartUploadCommand({ Bucket: name, Key: 'part.txt' }),
        );
        expect(
          await refusalOf(
            client,
            new UploadPartCopyCommand({ Bucket: name, Key: 'part.txt', UploadId, PartNumber: 1, CopySource }),
          ),
          `${label}: UploadPartCopy ${VersionId}`,
        ).toMatchObject(copySource);
      }
      expect(
        await refusalOf(client, new GetObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: '' })),
        `${label}: an empty version id`,
      ).toMatchObject(invalid('', 'Version id cannot be the empty string'));
      // Nothing went, and `null` and the ids Coffer makes are still read.
      const listed = await client.send(new ListObjectVersionsCommand({ Bucket: name }));
      expect(
        listed.Versions?.map((version) => version.Key),
        label,
      ).toEqual(['doc.txt']);
      const [current] = listed.Versions!;
      const read = await client.send(
        new GetObjectCommand({ Bucket: name, Key: 'doc.txt', VersionId: current!.VersionId }),
      );
      expect(await read.Body?.transformToString(), label).toBe('text');
      // DeleteObjects answers such an id of a key as a version the key does not have, as S3 does.
      const many = await client.send(
        new DeleteObjectsCommand({
          Bucket: name,
          Delete: { Objects: [{ Key: 'doc.txt', VersionId: 'abc' }] },
        }),
      );
      expect(
        many.Errors?.map((error) => [error.Key, error.VersionId, error.Code]),
        label,
      ).toEqual([['doc.txt', 'abc', 'NoSuchVersion']]);
    }
  });

  it('refuses a CreateBucket of any bucket but the caller’s with 403 AccessDenied, whether another project has it or not', async () => {
    const { client, name } = await bucketWith();
    const other = await bucketWith();
    await client.send(new CreateBucketCommand({ Bucket: name }));
    for (const Bucket of [`${name}-new`, other.name]) {
      const refused = await refusalOf(client, new CreateBucketCommand({ Bucket }));
      expect(refused, Bucket).toMatchObject({ code: 'AccessDenied', status: 403 });
      expect(refused.elements.Message, Bucket).toBe(
        'Buckets are Coffer projects: they are not created through S3',
      );
    }
    // A name S3 never takes is still invalid.
    expect(await refusalOf(client, new CreateBucketCommand({ Bucket: 'Not_A_Bucket' }))).toMatchObject({
      code: 'InvalidBucketName',
      status: 400,
    });
    // The other project's bucket is untouched, and still its own only.
    await other.client.send(putText(other.name, 'a.txt'));
    const read = await refusalOf(client, new GetObjectCommand({ Bucket: other.name, Key: 'a.txt' }));
    expect(read).toMatchObject({ code: 'NoSuchBucket', status: 404 });
  });
});
