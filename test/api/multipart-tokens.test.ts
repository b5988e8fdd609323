import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { storage } from '../support/backends.ts';
import type { TestProject } from '../support/coffer.ts';
import { coffer, MiB, serveMultipart } from '../support/multipart.ts';

serveMultipart();

describe('multipart with an upload token', () => {
  const token = async (project: TestProject, body: Record<string, unknown>) => {
    const reply = await project.call('POST', '/upload-tokens', { body });
    expect(reply.status).toBe(201);
    return reply.body.token as string;
  };
  const putPartWith = async (
    project: TestProject,
    secret: string,
    uploadId: string,
    part: number,
    bytes: Buffer,
  ) => {
    const url = await project.call(
      'GET',
      `/files/upload/multipart/${uploadId}/part-url?part=${part}&size=${bytes.length}`,
      { token: secret },
    );
    expect(url.status).toBe(200);
    expect((await fetch(url.body.url, { method: 'PUT', body: bytes })).status).toBe(200);
  };
  const startWith = (
    project: TestProject,
    secret: string,
    total: number,
    contentType = 'application/octet-stream',
  ) =>
    project.call('POST', '/files/upload/multipart/start', {
      token: secret,
      body: { filename: 'a.bin', content_type: contentType, total_size_bytes: total },
    });

  // Unsized part URLs exist on the local store only: it bounds what their parts store while they stream.
  it.skipIf(storage === 's3')(
    'keeps the bytes a session stores within what it declared, so a token cannot fill the disk',
    async () => {
      const project = await coffer.newProject();
      const secret = await token(project, { max_size: 1000 });
      const { upload_id: uploadId } = (await startWith(project, secret, 1000)).body;
      const partUrl = async (part: number) =>
        (
          await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=${part}`, {
            token: secret,
          })
        ).body.url as string;
      const put = (url: string, body: Buffer | ReadableStream) =>
        fetch(url, { method: 'PUT', body, duplex: 'half' } as RequestInit);
      const chunked = (bytes: Buffer) =>
        new ReadableStream({
          start(controller) {
            controller.enqueue(new Uint8Array(bytes));
            controller.close();
          },
        });

      // One part longer than the whole upload: refused from its Content-Length, or while streaming.
      for (const body of [randomBytes(8 * MiB), chunked(randomBytes(8 * MiB))]) {
        const reply = await put(await partUrl(1), body);
        expect(reply.status).toBe(413);
        expect(((await reply.json()) as any).error.code).toBe('REQUEST_TOO_LARGE');
      }
      // Parts up to twice the declared total (room for a part re-cut), then no more.
      expect((await put(await partUrl(1), randomBytes(1000))).status).toBe(200);
      expect((await put(await partUrl(2), randomBytes(1000))).status).toBe(200);
      const over = await put(await partUrl(3), randomBytes(1));
      expect(over.status).toBe(413);
      expect(((await over.json()) as any).error.details).toMatchObject({
        max_bytes: 2000,
        stored_bytes: 2000,
      });
      // Replacing a part does not count its old version.
      const last = randomBytes(1000);
      const etag = (await put(await partUrl(1), last)).headers.get('etag')!;
      const parts = await project.call('GET', `/files/upload/multipart/${uploadId}`, { token: secret });
      expect(parts.body.parts.map((part: { size_bytes: number }) => part.size_bytes)).toEqual([1000, 1000]);
      const done = await project.call('POST', `/files/upload/multipart/${uploadId}/complete`, {
        token: secret,
        body: { parts: [{ part_number: 1, etag }] },
      });
      expect(done.status).toBe(200);
      expect(done.body.size_bytes).toBe(1000);
    },
  );

  it.skipIf(storage === 's3')('holds the stored-bytes bound when the parts arrive all at once', async () => {
    const project = await coffer.newProject();
    const secret = await token(project, { max_size: 1000 });
    const { upload_id: uploadId } = (await startWith(project, secret, 1000)).body;
    const statuses = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const url = (
          await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=${i + 1}`, {
            token: secret,
          })
        ).body.url;
        return (await fetch(url, { method: 'PUT', body: randomBytes(1000) })).status;
      }),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(2);
    expect(statuses.filter((status) => status === 413)).toHaveLength(18);
  });

  it('grants sized part URLs up to twice the declared total, so a token cannot fill the store', async () => {
    const project = await coffer.newProject();
    const secret = await token(project, { max_size: 1000 });
    const { upload_id: uploadId } = (await startWith(project, secret, 1000)).body;
    const partUrl = (part: number, size: number) =>
      project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=${part}&size=${size}`, {
        token: secret,
      });
    const tooLong = await partUrl(1, 1001);
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.error.details).toMatchObject({ field: 'size' });
    // Twenty parts asked for at once: the grants stop at twice the total.
    const granted = await Promise.all(Array.from({ length: 20 }, (_, i) => partUrl(i + 1, 500)));
    expect(granted.filter((reply) => reply.status === 200)).toHaveLength(4);
    const refused = granted.filter((reply) => reply.status === 413);
    expect(refused).toHaveLength(16);
    expect(refused[0]!.body.error).toMatchObject({
      code: 'REQUEST_TOO_LARGE',
      details: { max_bytes: 2000, granted_bytes: 2000 },
    });
    // A granted part number may be signed again at its size or below; its bytes must be exact.
    const number = granted.findIndex((reply) => reply.status === 200) + 1;
    const again = await partUrl(number, 500);
    expect(again.status).toBe(200);
    expect(
      (await fetch(again.body.url, { method: 'PUT', body: randomBytes(501) })).status,
    ).toBeGreaterThanOrEqual(400);
    expect((await fetch(again.body.url, { method: 'PUT', body: randomBytes(500) })).status).toBe(200);
  });

  // A streamed body (no Content-Length) is the local store's: S3 part URLs sign the length.
  it.skipIf(storage === 's3')('answers 404 to a part still arriving when its upload is aborted', async () => {
    const project = await coffer.newProject();
    const { upload_id: uploadId } = (await startWith(project, await token(project, {}), 2000)).body;
    const url = (await project.call('GET', `/files/upload/multipart/${uploadId}/part-url?part=1&size=2000`))
      .body.url;
    let finish!: () => void;
    const halfway = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const body = new ReadableStream({
      async start(controller) {
        controller.enqueue(new Uint8Array(randomBytes(1000)));
        await halfway;
        controller.enqueue(new Uint8Array(randomBytes(1000)));
        controller.close();
      },
    });
    const put = fetch(url, { method: 'PUT', body, duplex: 'half' } as RequestInit);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await project.call('DELETE', `/files/upload/multipart/${uploadId}`)).status).toBe(204);
    finish();
    const reply = await put;
    expect(reply.status).toBe(404);
    expect(((await reply.json()) as any).error.code).toBe('NOT_FOUND');
  });

  it('applies the token constraints to total_size_bytes and counts a start toward max_files', async () => {
    const project = await coffer.newProject();
    const secret = await token(project, {
      max_size: 100,
      max_files: 2,
      allowed_mime_types: ['application/*'],
    });
    const tooBig = await startWith(project, secret, 101);
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error).toMatchObject({
      code: 'FILE_TOO_LARGE',
      details: { field: 'total_size_bytes' },
    });
    expect((await startWith(project, secret, 10, 'image/png')).status).toBe(422);
    expect((await startWith(project, secret, 10)).status).toBe(201);
    expect(
      (
        await project.call('POST', '/files/upload', {
          token: secret,
          body: { filename: 'b.bin', content_type: 'application/octet-stream', size_bytes: 1 },
        })
      ).status,
    ).toBe(201);
    const third = await startWith(project, secret, 10);
    expect(third.status).toBe(403);
    expect(third.body.error.code).toBe('TOKEN_LIMIT_REACHED');
  });

  it('lets a token drive only its own sessions', async () => {
    const project = await coffer.newProject();
    const mine = await token(project, {});
    const other = await token(project, {});
    const session = (await startWith(project, mine, 3)).body;
    const url = await project.call(
      'GET',
      `/files/upload/multipart/${session.upload_id}/part-url?part=1&size=3`,
      {
        token: mine,
      },
    );
    expect(url.status).toBe(200);
    const etag = (await fetch(url.body.url, { method: 'PUT', body: 'abc' })).headers.get('etag');
    for (const [method, path, body] of [
      ['GET', `/files/upload/multipart/${session.upload_id}`, undefined],
      ['GET', `/files/upload/multipart/${session.upload_id}/part-url?part=1`, undefined],
      [
        'POST',
        `/files/upload/multipart/${session.upload_id}/complete`,
        { parts: [{ part_number: 1, etag }] },
      ],
      ['DELETE', `/files/upload/multipart/${session.upload_id}`, undefined],
    ] as const) {
      const reply = await project.call(method, path, { token: other, body });
      expect(reply.status, `${method} ${path}`).toBe(404);
    }
    const done = await project.call('POST', `/files/upload/multipart/${session.upload_id}/complete`, {
      token: mine,
      body: { parts: [{ part_number: 1, etag }] },
    });
    expect(done.status).toBe(200);
    expect(done.body.status).toBe('ready');
  });

  it('lets a replacement token of the same owner finish a session, and keeps other owners out', async () => {
    const project = await coffer.newProject();
    const first = await token(project, { owner_user_id: 'user_1', owner_org_id: 'org_1' });
    const session = (await startWith(project, first, 3)).body;
    await putPartWith(project, first, session.upload_id, 1, Buffer.from('abc'));
    const strangers = [
      await token(project, { owner_user_id: 'user_1', owner_org_id: 'org_2' }),
      await token(project, { owner_user_id: 'user_2', owner_org_id: 'org_1' }),
      await token(project, {}),
    ];
    for (const stranger of strangers) {
      const reply = await project.call('GET', `/files/upload/multipart/${session.upload_id}`, {
        token: stranger,
      });
      expect(reply.status).toBe(404);
    }
    // The first token expired; the app hands the browser a new one for the same user and organization.
    const replacement = await token(project, { owner_user_id: 'user_1', owner_org_id: 'org_1' });
    const listed = await project.call('GET', `/files/upload/multipart/${session.upload_id}`, {
      token: replacement,
    });
    expect(listed.status).toBe(200);
    const [part] = listed.body.parts;
    const done = await project.call('POST', `/files/upload/multipart/${session.upload_id}/complete`, {
      token: replacement,
      body: { parts: [{ part_number: 1, etag: part.etag }] },
    });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ id: session.file_id, owner_user_id: 'user_1', owner_org_id: 'org_1' });

    // A session of a token without owner stays that token's alone.
    const anonymous = await token(project, {});
    const own = (await startWith(project, anonymous, 3)).body;
    const other = await token(project, {});
    expect(
      (await project.call('GET', `/files/upload/multipart/${own.upload_id}`, { token: other })).status,
    ).toBe(404);
  });
});
