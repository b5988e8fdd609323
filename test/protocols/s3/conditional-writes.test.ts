import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { drain } from '../../support/pipeline.ts';
import { md5, refusal, s3EndpointSuite, text } from '../../support/s3-endpoint.ts';

// Conditional writes through the S3 endpoint, as the current AWS SDK for JavaScript sends them:
// If-None-Match and If-Match on PutObject, CompleteMultipartUpload and CopyObject, checked again as the
// write is recorded, and while new content waits for its scan.
const { coffer, bucketWith, cutInAfterNextWrite, strandCompletion } = s3EndpointSuite();

describe('the S3 endpoint', () => {
  it('honours conditional PutObjects: If-None-Match: * and If-Match, checked again as the write is recorded', async () => {
    const { client, name, project } = await bucketWith();
    const put = (
      Key: string,
      Body: string | Buffer,
      conditions: { IfNoneMatch?: string; IfMatch?: string } = {},
    ) =>
      client.send(
        new PutObjectCommand({ Bucket: name, Key, Body, ContentType: 'text/plain', ...conditions }),
      );
    const read = async (Key: string) =>
      (await text((await client.send(new GetObjectCommand({ Bucket: name, Key }))).Body)).toString();
    const usage = async () => (await project.call('GET', '/usage')).body.storage;

    const first = await put('c.txt', 'one', { IfNoneMatch: '*' });
    expect(await refusal(put('c.txt', 'two', { IfNoneMatch: '*' }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await refusal(put('c.txt', 'two', { IfMatch: `"${md5('other')}"` }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await refusal(put('none.txt', 'two', { IfMatch: first.ETag }))).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });
    expect(await read('c.txt')).toBe('one');
    // The ETag with its quotes, or without them.
    const second = await put('c.txt', 'two', { IfMatch: first.ETag });
    await put('c.txt', 'six', { IfMatch: second.ETag!.replace(/"/g, '') });
    expect(await read('c.txt')).toBe('six');

    // Two at once over a missing key: exactly one is stored, the other refused with its bytes.
    const racing = await Promise.allSettled(
      ['a', 'b'].map((fill) => put('race.txt', Buffer.alloc(256 * 1024, fill), { IfNoneMatch: '*' })),
    );
    expect(racing.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    const lost = racing.find((outcome) => outcome.status === 'rejected') as PromiseRejectedResult;
    expect(['PreconditionFailed', 'ConditionalRequestConflict']).toContain(
      (await refusal(Promise.reject(lost.reason))).code,
    );
    expect((await project.call('GET', '/files?q=race.txt')).body.total).toBe(1);

    // A write that lands between the check and the record wins: the conditional one is refused with 409.
    const undo = cutInAfterNextWrite(() => put('late.txt', 'winner'));
    try {
      expect(await refusal(put('late.txt', 'loser', { IfNoneMatch: '*' }))).toEqual({
        code: 'ConditionalRequestConflict',
        status: 409,
      });
    } finally {
      undo();
    }
    expect(await read('late.txt')).toBe('winner');
    expect(await usage()).toMatchObject({ used_bytes: 3 + 256 * 1024 + 6, reserved_bytes: 0 });
  });

  it('honours If-None-Match on CompleteMultipartUpload, before and after assembling the object', async () => {
    const { client, name, project } = await bucketWith();
    const start = async (Key: string) => {
      const { UploadId } = await client.send(
        new CreateMultipartUploadCommand({ Bucket: name, Key, ContentType: 'text/plain' }),
      );
      const part = await client.send(
        new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: 'parts' }),
      );
      return (IfNoneMatch?: string) =>
        client.send(
          new CompleteMultipartUploadCommand({
            Bucket: name,
            Key,
            UploadId,
            IfNoneMatch,
            MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
          }),
        );
    };
    const put = (Key: string, Body: string) =>
      client.send(new PutObjectCommand({ Bucket: name, Key, Body, ContentType: 'text/plain' }));
    const read = async (Key: string) =>
      (await text((await client.send(new GetObjectCommand({ Bucket: name, Key }))).Body)).toString();

    // Over an existing key: refused before assembly, the upload still open.
    await put('m.txt', 'existing');
    const complete = await start('m.txt');
    expect(await refusal(complete('*'))).toEqual({ code: 'PreconditionFailed', status: 412 });
    expect((await client.send(new ListMultipartUploadsCommand({ Bucket: name }))).Uploads).toHaveLength(1);
    expect(await read('m.txt')).toBe('existing');

    // A write that lands while the parts are assembled: the upload ends, its object collected.
    const { store } = coffer.services;
    const assemble = store.completeMultipart.bind(store);
    store.completeMultipart = async (...args: Parameters<typeof store.completeMultipart>) => {
      const assembled = await assemble(...args);
      await put('n.txt', 'winner');
      return assembled;
    };
    const late = await start('n.txt');
    try {
      expect(await refusal(late('*'))).toEqual({ code: 'ConditionalRequestConflict', status: 409 });
    } finally {
      store.completeMultipart = assemble;
    }
    expect(await read('n.txt')).toBe('winner');
    expect(await refusal(late())).toEqual({ code: 'NoSuchUpload', status: 404 });
    const retired = await coffer.services.db.query('SELECT 1 FROM retired_objects WHERE project_id = $1', [
      project.id,
    ]);
    expect(retired).toHaveLength(1);
    expect((await project.call('GET', '/usage')).body.storage).toMatchObject({
      used_bytes: 'existing'.length + 'winner'.length,
      reserved_bytes: 0,
    });
    // Over a missing key it completes.
    await (await start('o.txt'))('*');
    expect(await read('o.txt')).toBe('parts');
  });

  it('refuses If-Match while new content waits for its scan, and answers the ETag of the bytes stored', async () => {
    const { client, name } = await bucketWith({ virus_scan_enabled: true });
    const put = (Key: string, Body: string, IfMatch?: string) =>
      client.send(new PutObjectCommand({ Bucket: name, Key, Body, ContentType: 'text/plain', IfMatch }));
    const read = async (Key: string) =>
      (await text((await client.send(new GetObjectCommand({ Bucket: name, Key }))).Body)).toString();
    const first = await put('s.txt', 'one');
    await drain(coffer.services.pipeline);

    const second = await put('s.txt', 'two', first.ETag);
    expect(second.ETag).toBe(`"${md5('two')}"`);
    // The file shows its content before until the scan passes; the write it waits for changed it already.
    expect((await client.send(new HeadObjectCommand({ Bucket: name, Key: 's.txt' }))).ETag).toBe(first.ETag);
    // Neither the ETag shown nor the one the write answered is final until the scan passes: a
    // conflict to try again, not a mismatch.
    for (const etag of [first.ETag, second.ETag]) {
      expect(await refusal(put('s.txt', 'three', etag))).toEqual({
        code: 'ConditionalRequestConflict',
        status: 409,
      });
    }
    // `*` asks only that an object is there, which it is, scanned or not; the newest write ends current.
    expect((await put('s.txt', 'any', '*')).ETag).toBe(`"${md5('any')}"`);
    await drain(coffer.services.pipeline);
    expect(await read('s.txt')).toBe('any');
    const shown = await client.send(new HeadObjectCommand({ Bucket: name, Key: 's.txt' }));
    await put('s.txt', 'two', shown.ETag);
    await drain(coffer.services.pipeline);
    expect(await read('s.txt')).toBe('two');
    await put('s.txt', 'four', second.ETag);
    await drain(coffer.services.pipeline);
    expect(await read('s.txt')).toBe('four');

    // New content stored between the check and the record: refused as the key is locked.
    await put('t.txt', 'one');
    await drain(coffer.services.pipeline);
    const { ETag } = await client.send(new HeadObjectCommand({ Bucket: name, Key: 't.txt' }));
    const undo = cutInAfterNextWrite(() => put('t.txt', 'winner'));
    try {
      expect(await refusal(put('t.txt', 'loser', ETag))).toEqual({
        code: 'ConditionalRequestConflict',
        status: 409,
      });
    } finally {
      undo();
    }
    await drain(coffer.services.pipeline);
    expect(await read('t.txt')).toBe('winner');
  });

  it('aborts, in the reaper, a conditional CompleteMultipartUpload whose outcome was lost', async () => {
    const bucket = await bucketWith();
    const { client, name, project } = bucket;
    const { db } = coffer.services;
    const put = (Key: string, Body: string) =>
      client.send(new PutObjectCommand({ Bucket: name, Key, Body, ContentType: 'text/plain' }));
    const read = async (Key: string) =>
      (await text((await client.send(new GetObjectCommand({ Bucket: name, Key }))).Body)).toString();
    /** A conditional complete whose store assembles the object, then answers nothing more. */
    const strand = (Key: string, complete: { IfNoneMatch?: string; IfMatch?: string }) =>
      strandCompletion(bucket, Key, { complete });

    const created = await strand('new.txt', { IfNoneMatch: '*' });
    const existing = await put('old.txt', 'existing');
    const replacing = await strand('old.txt', { IfMatch: existing.ETag });
    // Another write lands at the key while the first upload waits for the reaper.
    await put('new.txt', 'winner');
    await db.query(
      "UPDATE multipart_sessions SET completing_since = now() - interval '2 hours' WHERE id = ANY($1::text[])",
      [[created, replacing]],
    );
    await coffer.services.multipart.reap();

    const sessions = await db.query<{ status: string }>(
      'SELECT status FROM multipart_sessions WHERE id = ANY($1::text[])',
      [[created, replacing]],
    );
    expect(sessions).toEqual([{ status: 'aborted' }, { status: 'aborted' }]);
    expect(await read('new.txt')).toBe('winner');
    expect(await read('old.txt')).toBe('existing');
    const contents = await db.query<{ status: string }>(
      'SELECT status FROM pending_contents WHERE project_id = $1',
      [project.id],
    );
    expect(contents).toEqual([{ status: 'failed' }]);
    expect((await project.call('GET', '/usage')).body.storage).toMatchObject({
      used_bytes: 'existing'.length + 'winner'.length,
      reserved_bytes: 0,
    });
  });

  it('holds a CopyObject to the conditions on its destination: If-None-Match: * and If-Match', async () => {
    const { client, name } = await bucketWith();
    const put = (Key: string, Body: string) => client.send(new PutObjectCommand({ Bucket: name, Key, Body }));
    const read = async (Key: string) =>
      (await text((await client.send(new GetObjectCommand({ Bucket: name, Key }))).Body)).toString();
    const copy = (Key: string, conditions: { IfNoneMatch?: string; IfMatch?: string }) =>
      client.send(new CopyObjectCommand({ Bucket: name, Key, CopySource: `${name}/src.txt`, ...conditions }));
    await put('src.txt', 'source');
    const taken = await put('taken.txt', 'taken');

    expect(await refusal(copy('taken.txt', { IfNoneMatch: '*' }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await refusal(copy('taken.txt', { IfMatch: `"${md5('other')}"` }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await refusal(copy('missing.txt', { IfMatch: '*' }))).toEqual({ code: 'NoSuchKey', status: 404 });
    expect(await read('taken.txt')).toBe('taken');
    await expect(read('missing.txt')).rejects.toThrow();

    await copy('new.txt', { IfNoneMatch: '*' });
    expect(await read('new.txt')).toBe('source');
    await copy('taken.txt', { IfMatch: taken.ETag });
    expect(await read('taken.txt')).toBe('source');

    // A write that lands between the check and the record wins: the conditional copy is refused with 409.
    const undo = cutInAfterNextWrite(() => put('late.txt', 'winner'));
    try {
      expect(await refusal(copy('late.txt', { IfNoneMatch: '*' }))).toEqual({
        code: 'ConditionalRequestConflict',
        status: 409,
      });
    } finally {
      undo();
    }
    expect(await read('late.txt')).toBe('winner');
  });
});
