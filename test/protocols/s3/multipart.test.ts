import { createHash, randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it, vi } from 'vitest';
import { md5, refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// Multipart uploads through the S3 endpoint, as the current AWS SDK for JavaScript sends them: parts,
// completing and aborting, an upload named by its key and its id, a complete sent again; every result
// is checked through Coffer's own REST API too.
const { coffer, bucketWith } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  it("takes a multipart upload: parts, listing them, completing with S3's ETag; the size settles then", async () => {
    const { client, name, project } = await bucketWith();
    const parts = [randomBytes(5 * 1024 * 1024), randomBytes(5 * 1024 * 1024), randomBytes(321)];
    const created = await client.send(
      new CreateMultipartUploadCommand({
        Bucket: name,
        Key: 'big/data.bin',
        ContentType: 'application/octet-stream',
      }),
    );
    const uploadId = created.UploadId!;
    const listedUploads = await client.send(new ListMultipartUploadsCommand({ Bucket: name }));
    expect(listedUploads.Uploads?.map((upload) => [upload.Key, upload.UploadId])).toEqual([
      ['big/data.bin', uploadId],
    ]);
    const etags: string[] = [];
    for (const [index, part] of parts.entries()) {
      const sent = await client.send(
        new UploadPartCommand({
          Bucket: name,
          Key: 'big/data.bin',
          UploadId: uploadId,
          PartNumber: index + 1,
          Body: part,
        }),
      );
      expect(sent.ETag).toBe(`"${md5(part)}"`);
      etags.push(sent.ETag!);
    }
    const listedParts = await client.send(
      new ListPartsCommand({ Bucket: name, Key: 'big/data.bin', UploadId: uploadId }),
    );
    expect(listedParts.Parts?.map((part) => part.Size)).toEqual(parts.map((part) => part.length));
    const done = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key: 'big/data.bin',
        UploadId: uploadId,
        MultipartUpload: { Parts: etags.map((ETag, index) => ({ ETag, PartNumber: index + 1 })) },
      }),
    );
    const whole = Buffer.concat(parts);
    const expectedEtag = `"${md5(Buffer.concat(parts.map((part) => createHash('md5').update(part).digest())))}-3"`;
    expect(done.ETag).toBe(expectedEtag);
    const file = (await project.call('GET', '/files?q=data.bin')).body.items[0];
    expect(file).toMatchObject({ status: 'ready', size_bytes: whole.length });
    const usage = (await project.call('GET', '/usage')).body;
    expect(usage.storage.used_bytes).toBe(whole.length);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'big/data.bin' }));
    expect(
      createHash('sha256')
        .update(await text(got.Body))
        .digest('hex'),
    ).toBe(createHash('sha256').update(whole).digest('hex'));
    expect(
      await refusal(
        client.send(new ListPartsCommand({ Bucket: name, Key: 'big/data.bin', UploadId: uploadId })),
      ),
    ).toEqual({ code: 'NoSuchUpload', status: 404 });
  });

  it('aborts a multipart upload, and refuses a part list that does not match', async () => {
    const { client, name, project } = await bucketWith();
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'x.bin' }));
    const small = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'x.bin', UploadId, PartNumber: 1, Body: 'tiny' }),
    );
    const tail = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'x.bin', UploadId, PartNumber: 2, Body: 'tail' }),
    );
    const complete = (Parts: { ETag: string; PartNumber: number }[]) =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key: 'x.bin',
          UploadId,
          MultipartUpload: { Parts },
        }),
      );
    // The order is checked first, before the small part that is not the last.
    expect(
      await refusal(
        complete([
          { ETag: tail.ETag!, PartNumber: 2 },
          { ETag: small.ETag!, PartNumber: 1 },
        ]),
      ),
    ).toEqual({ code: 'InvalidPartOrder', status: 400 });
    expect(await refusal(complete([{ ETag: '"0123"', PartNumber: 1 }]))).toEqual({
      code: 'InvalidPart',
      status: 400,
    });
    expect(
      await refusal(
        complete([
          { ETag: small.ETag!, PartNumber: 1 },
          { ETag: small.ETag!, PartNumber: 2 },
        ]),
      ),
    ).toMatchObject({ status: 400 });
    await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key: 'x.bin', UploadId }));
    expect(
      await refusal(
        client.send(
          new UploadPartCommand({ Bucket: name, Key: 'x.bin', UploadId, PartNumber: 3, Body: 'late' }),
        ),
      ),
    ).toEqual({ code: 'NoSuchUpload', status: 404 });
    const failed = (await project.call('GET', '/files?status=failed')).body;
    expect(failed.items.map((file: { failure_reason: string }) => file.failure_reason)).toEqual([
      'upload_aborted',
    ]);
  });

  it('refuses a part whose checksum does not match with BadDigest, the failure its request’s alone', async () => {
    const { client, name } = await bucketWith();
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'x.bin' }));
    // A small body is checked whole before the store starts reading it: the failure waits for its reader.
    const uncaught = vi.fn();
    process.on('uncaughtException', uncaught);
    try {
      for (const PartNumber of [1, 2]) {
        const sent = client.send(
          new UploadPartCommand({
            Bucket: name,
            Key: 'x.bin',
            UploadId,
            PartNumber,
            Body: 'tiny',
            ChecksumCRC32: 'AAAAAA==',
          }),
        );
        expect(await refusal(sent)).toEqual({ code: 'BadDigest', status: 400 });
      }
    } finally {
      process.off('uncaughtException', uncaught);
    }
    expect(uncaught).not.toHaveBeenCalled();
    const listed = await client.send(new ListPartsCommand({ Bucket: name, Key: 'x.bin', UploadId }));
    expect(listed.Parts ?? []).toEqual([]);
  });

  it('names an upload by its key and its id: another key finds none, and a repeated complete answers again', async () => {
    const { client, name } = await bucketWith();
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'mp/obj' }));
    const other = { Bucket: name, Key: 'mp/other', UploadId };
    const noUpload = { code: 'NoSuchUpload', status: 404 };
    expect(
      await refusal(client.send(new UploadPartCommand({ ...other, PartNumber: 1, Body: 'abc' }))),
    ).toEqual(noUpload);
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'mp/obj', UploadId, PartNumber: 1, Body: 'abc' }),
    );
    const Parts = [{ ETag: part.ETag!, PartNumber: 1 }];
    expect(await refusal(client.send(new ListPartsCommand(other)))).toEqual(noUpload);
    expect(
      await refusal(
        client.send(new CompleteMultipartUploadCommand({ ...other, MultipartUpload: { Parts } })),
      ),
    ).toEqual(noUpload);
    expect(await refusal(client.send(new AbortMultipartUploadCommand(other)))).toEqual(noUpload);
    expect(
      await refusal(client.send(new HeadObjectCommand({ Bucket: name, Key: 'mp/other' }))),
    ).toMatchObject({
      status: 404,
    });
    // The upload is untouched by all of that.
    const listed = await client.send(new ListPartsCommand({ Bucket: name, Key: 'mp/obj', UploadId }));
    expect(listed.Parts?.map((p) => p.PartNumber)).toEqual([1]);
    const complete = () =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key: 'mp/obj',
          UploadId,
          MultipartUpload: { Parts },
        }),
      );
    const first = await complete();
    expect(first.ETag).toMatch(/-1"$/);
    // A client whose answer was lost completes again: the same answer, not NoSuchUpload, its
    // conditions included (which the object the first made now fails).
    const again = await complete();
    expect({ ETag: again.ETag, Key: again.Key, Location: again.Location }).toEqual({
      ETag: first.ETag,
      Key: 'mp/obj',
      Location: first.Location,
    });
    const conditional = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: name,
        Key: 'mp/obj',
        UploadId,
        MultipartUpload: { Parts },
        IfNoneMatch: '*',
      }),
    );
    expect(conditional.ETag).toBe(first.ETag);
    expect(
      await refusal(
        client.send(new CompleteMultipartUploadCommand({ ...other, MultipartUpload: { Parts } })),
      ),
    ).toEqual(noUpload);
    // Once the key holds other content, the upload's is gone: completing it again finds no upload.
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'mp/obj', Body: 'newer' }));
    expect(await refusal(complete())).toEqual(noUpload);
    const got = await client.send(new GetObjectCommand({ Bucket: name, Key: 'mp/obj' }));
    expect((await text(got.Body)).toString()).toBe('newer');
  });

  it('answers a complete sent again while the first still assembles, once it has', async () => {
    const { client, name } = await bucketWith();
    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket: name, Key: 'slow.bin' }),
    );
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key: 'slow.bin', UploadId, PartNumber: 1, Body: 'slow' }),
    );
    const complete = () =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key: 'slow.bin',
          UploadId,
          MultipartUpload: { Parts: [{ ETag: part.ETag!, PartNumber: 1 }] },
        }),
      );
    const { store } = coffer.services;
    const assemble = store.completeMultipart.bind(store);
    let assembling!: () => void;
    const started = new Promise<void>((resolve) => {
      assembling = resolve;
    });
    store.completeMultipart = async (...args: Parameters<typeof store.completeMultipart>) => {
      assembling();
      await new Promise((resolve) => setTimeout(resolve, 600));
      return assemble(...args);
    };
    try {
      const first = complete();
      await started;
      const [one, two] = await Promise.all([first, complete()]);
      expect(two.ETag).toBe(one.ETag);
      expect(one.ETag).toMatch(/-1"$/);
    } finally {
      store.completeMultipart = assemble;
    }
  });

  it('lists no upload of new content for a file deleted since: every call on it answers NoSuchUpload', async () => {
    const { client, name } = await bucketWith();
    await client.send(new PutObjectCommand({ Bucket: name, Key: 'kept.txt', Body: 'x' }));
    const over = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'kept.txt' }));
    // An upload that makes a new file at its key stays, as S3 keeps an upload whatever the key holds.
    const fresh = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key: 'new.txt' }));
    await client.send(new DeleteObjectCommand({ Bucket: name, Key: 'kept.txt' }));
    const listed = await client.send(new ListMultipartUploadsCommand({ Bucket: name }));
    expect(listed.Uploads?.map((upload) => [upload.Key, upload.UploadId])).toEqual([
      ['new.txt', fresh.UploadId],
    ]);
    expect(
      await refusal(
        client.send(
          new AbortMultipartUploadCommand({ Bucket: name, Key: 'kept.txt', UploadId: over.UploadId }),
        ),
      ),
    ).toEqual({ code: 'NoSuchUpload', status: 404 });
  });

  it('grants a part in one statement, no transaction holding its upload while other parts wait', async () => {
    const { client, name } = await bucketWith();
    const Key = 'granted.bin';
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: name, Key }));
    const { db } = coffer.services;
    const { query, tx } = db;
    /** The statements about the upload, those run in a transaction marked so. */
    const statements: string[] = [];
    const record = (sql: string, params: unknown[] | undefined, where = '') => {
      if (params?.includes(UploadId)) statements.push(`${where}${sql.replace(/\s+/g, ' ').trim()}`);
    };
    db.query = ((sql: string, params?: unknown[]) => {
      record(sql, params);
      return query.call(db, sql, params);
    }) as typeof db.query;
    db.tx = ((work: Parameters<typeof db.tx>[0]) =>
      tx.call(db, (q) =>
        work({
          query: (sql: string, params?: unknown[]) => {
            record(sql, params, 'in a transaction: ');
            return q.query(sql, params);
          },
          exec: (sql: string) => q.exec(sql),
        } as typeof q),
      )) as typeof db.tx;
    try {
      for (const PartNumber of [1, 2])
        await client.send(
          new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber, Body: randomBytes(1024) }),
        );
    } finally {
      db.query = query;
      db.tx = tx;
    }
    // Per part: the upload with its file, then the grant.
    expect(statements).toEqual([
      expect.stringMatching(/FROM multipart_sessions/),
      expect.stringMatching(/^UPDATE multipart_sessions SET part_grants/),
      expect.stringMatching(/FROM multipart_sessions/),
      expect.stringMatching(/^UPDATE multipart_sessions SET part_grants/),
    ]);
  });
});
