import { createHash } from 'node:crypto';
import { type ClientRequest, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import * as tus from 'tus-js-client';
import { expect } from 'vitest';
import { cofferForSuite, madeBeforeAll, request, type TestCoffer, type TestProject } from './coffer.ts';

export const MiB = 1024 * 1024;
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
export const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');

/** Runs a tus-js-client upload to its end; answers its URL. */
export function upload(data: Buffer, options: tus.UploadOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const run: tus.Upload = new tus.Upload(data, {
      retryDelays: [],
      ...options,
      onSuccess: () => resolve(run.url!),
      onError: reject,
    });
    run.start();
  });
}

/** A new upload token of `project` with `body`'s constraints. */
export async function uploadToken(project: TestProject, body: Record<string, unknown> = {}): Promise<string> {
  const reply = await project.call('POST', '/upload-tokens', { body });
  expect(reply.status).toBe(201);
  return reply.body.token;
}

export const auth = (token: string) => ({ Authorization: `Bearer ${token}` });
export const tusHeaders = (token: string, extra: Record<string, string> = {}) => ({
  'tus-resumable': '1.0.0',
  authorization: `Bearer ${token}`,
  ...extra,
});
export const offsetStream = { 'content-type': 'application/offset+octet-stream' };

/**
 * A request whose body goes chunked, without Content-Length, once the server answered 100 Continue:
 * as tus-java-client and tus-android-client send theirs.
 */
export function chunked(url: string, method: string, headers: Record<string, string>, body: Buffer) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders }>((resolve, reject) => {
    const sent = httpRequest(url, {
      method,
      headers: { ...headers, expect: '100-continue', 'transfer-encoding': 'chunked' },
    });
    sent.on('continue', () => sent.end(body));
    sent.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers }));
    });
    sent.on('error', reject);
  });
}

/**
 * Writes `bytes` a socket read's worth at a time, each once the one before was taken, so that the
 * client holds no copy (`pause` runs after each 4 MiB); resolves once they all left.
 */
export async function feed(sent: ClientRequest, bytes: Buffer, pause?: () => void) {
  for (let at = 0; at < bytes.length; at += 64 * 1024) {
    if (at > 0 && at % (4 * MiB) === 0) pause?.();
    if (!sent.write(bytes.subarray(at, at + 64 * 1024))) {
      await new Promise((resolve) => sent.once('drain', resolve));
    }
  }
  await new Promise<void>((resolve) => sent.write(Buffer.alloc(0), () => resolve()));
}

/**
 * A chunked PATCH at `offset` with `token` (no Content-Length), its body written by the caller once
 * `continued` (the server's 100 Continue); `answered` with its status and Upload-Offset.
 */
export function openChunkedPatch(url: string, token: string, offset: number) {
  const sent = httpRequest(url, {
    method: 'PATCH',
    headers: {
      ...tusHeaders(token, { ...offsetStream, 'upload-offset': String(offset) }),
      expect: '100-continue',
      'transfer-encoding': 'chunked',
    },
  });
  const continued = new Promise<void>((resolve) => sent.on('continue', resolve));
  // The headers go alone: the body waits for the server's 100 Continue.
  sent.flushHeaders();
  const answered = new Promise<{ status: number; offset: string | undefined }>((resolve, reject) => {
    sent.on('response', (response) => {
      response.resume();
      response.on('end', () =>
        resolve({ status: response.statusCode!, offset: response.headers['upload-offset'] as string }),
      );
    });
    sent.on('error', reject);
  });
  return { sent, continued, answered };
}

/**
 * The helpers of a suite that drives the tus endpoint of its server `a` for its `project`: both made
 * in the suite's `beforeAll`, read when a helper runs.
 */
export function tusEndpointOf(suite: () => { a: TestCoffer; project: TestProject }) {
  /**
   * The file's SHA-256 through REST: known at once for bytes the server wrote itself, else once the
   * digest job ran (parts assembled by S3).
   */
  async function checksumOf(fileId: string): Promise<string | null> {
    const { a, project } = suite();
    for (let batch = 0; batch < 100; batch++) {
      const checksum = (await project.call('GET', `/files/${fileId}`)).body.checksum_sha256;
      if (checksum !== null) return checksum;
      await a.services.pipeline.runOnce();
    }
    return null;
  }

  /** The file through REST once it settled: ready, with its bytes, checksum and events. */
  async function expectStored(fileId: string, data: Buffer) {
    const { a, project } = suite();
    const file = await project.call('GET', `/files/${fileId}`);
    expect(file.status).toBe(200);
    expect(file.body.status).toBe('ready');
    expect(file.body.size_bytes).toBe(data.length);
    expect(await checksumOf(fileId)).toBe(sha256(data));
    const link = await project.call('GET', `/files/${fileId}/download`);
    const bytes = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
    expect(bytes.equals(data)).toBe(true);
    const events = await a.services.db.query<{ type: string }>(
      'SELECT type FROM events WHERE file_id = $1 ORDER BY created_at, id',
      [fileId],
    );
    expect(events.map((event) => event.type)).toEqual(['file.uploaded', 'file.ready']);
    return file.body;
  }

  /** A PATCH of `bytes` at `offset`, with the project's key unless `token` is given. */
  const patchUpload = (url: string, offset: number, bytes: Buffer, token = suite().project.key) =>
    request(url, 'PATCH', {
      headers: tusHeaders(token, {
        'content-type': 'application/offset+octet-stream',
        'upload-offset': String(offset),
      }),
      body: bytes,
    });

  const fileIdOf = async (url: string, token = suite().project.key) =>
    (await request(url, 'HEAD', { headers: tusHeaders(token) })).headers.get('x-coffer-file-id')!;

  /** A PATCH of `bytes` at `offset` of the upload at `path`, sent to `node`. */
  const patchAt = (node: TestCoffer, path: string, offset: number, bytes: Buffer) =>
    patchUpload(`${node.url}${path}`, offset, bytes);

  /** A new upload of `length` bytes, made on `a`: its URL, its path and its file. */
  async function created(length: number) {
    const { a, project } = suite();
    const reply = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': String(length),
        'upload-metadata': `filename ${b64('x.bin')}`,
      }),
    });
    expect(reply.status).toBe(201);
    const url = reply.headers.get('location')!;
    return {
      url,
      path: new URL(url).pathname,
      fileId: reply.headers.get('x-coffer-file-id')!,
    };
  }

  /** The upload's offset as HEAD answers it. */
  async function offsetOf(url: string): Promise<number> {
    const { project } = suite();
    const head = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
    return Number(head.headers.get('upload-offset'));
  }

  return { expectStored, fileIdOf, patchUpload, patchAt, created, offsetOf };
}

/**
 * A Coffer with `env`, `a`, and a `project` on it for the tests of the file this is called in (made in
 * its `beforeAll`, closed in its `afterAll`), and the helpers of its tus endpoint.
 */
export function tusEndpointSuite(env?: Record<string, string>) {
  const a = cofferForSuite(env);
  const project = madeBeforeAll(() => a.newProject());
  return { a, project, ...tusEndpointOf(() => ({ a, project })) };
}
