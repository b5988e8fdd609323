import { createCipheriv, createHash } from 'node:crypto';
import type { Reply, TestCoffer, TestProject } from './coffer.ts';

export const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/**
 * Incompressible bytes that are the same on every run. Random bytes look like a zlib stream or an
 * executable to libmagic about one time in a hundred, and clients that guess a type from content
 * (s3cmd) would then send a type the extension does not match; these were checked to sniff as
 * application/octet-stream.
 */
export function opaqueBytes(size: number, seed = 'coffer'): Buffer {
  const key = createHash('sha256').update(seed).digest();
  return createCipheriv('aes-256-ctr', key, Buffer.alloc(16)).update(Buffer.alloc(size));
}

export interface UploadInput {
  filename?: string;
  content_type?: string;
  bytes?: Buffer | string;
  folder_id?: string | null;
  metadata?: Record<string, unknown>;
  tags?: string[];
  token?: string;
}

/** Initiates an upload (201 expected) and returns the reply body. */
export async function initiate(project: TestProject, input: UploadInput = {}) {
  const bytes = Buffer.from(input.bytes ?? 'hello world');
  const reply = await project.call('POST', '/files/upload', {
    token: input.token,
    body: {
      filename: input.filename ?? 'hello.txt',
      content_type: input.content_type ?? 'text/plain',
      size_bytes: bytes.length,
      ...(input.folder_id !== undefined ? { folder_id: input.folder_id } : {}),
      ...(input.metadata ? { metadata: input.metadata } : {}),
      ...(input.tags ? { tags: input.tags } : {}),
    },
  });
  if (reply.status !== 201) throw new Error(`initiate failed: ${reply.status} ${JSON.stringify(reply.body)}`);
  return { ...(reply.body as { file_id: string; upload_url: string; expires_at: string }), bytes };
}

export async function put(
  url: string,
  bytes: Buffer | string,
  contentType = 'text/plain',
): Promise<{ status: number; headers: Headers; text: string }> {
  const response = await fetch(url, {
    method: 'PUT',
    body: Buffer.from(bytes),
    headers: { 'content-type': contentType },
  });
  // Read to the end, so that no connection stays busy and the server can close.
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** Initiate, PUT and confirm: the whole two-step upload. Returns the confirmed file. */
export async function upload(project: TestProject, input: UploadInput = {}): Promise<Reply> {
  const started = await initiate(project, input);
  const stored = await put(started.upload_url, started.bytes, input.content_type ?? 'text/plain');
  if (stored.status !== 200) throw new Error(`PUT failed: ${stored.status} ${stored.text}`);
  return project.call('POST', `/files/${started.file_id}/confirm`, { token: input.token });
}

/**
 * The checksum a file reaches: the one it has right away on a store that hashes uploads, or the one
 * the digest job records after reading the bytes (run here, as a worker would). Asserts that it is
 * null until then, as documented.
 */
export async function settledChecksum(coffer: TestCoffer, project: TestProject, fileId: string) {
  const before = (await project.call('GET', `/files/${fileId}`)).body.checksum_sha256;
  if (coffer.services.store.capabilities.sha256OnUpload) return before;
  if (before !== null) throw new Error(`checksum_sha256 is ${before} before the digest job ran`);
  // Jobs of other tests share the database and are claimed oldest first: run until this one is done.
  for (let batch = 0; batch < 100; batch++) {
    const claimed = await coffer.services.pipeline.runOnce();
    const after = (await project.call('GET', `/files/${fileId}`)).body.checksum_sha256;
    if (after !== null || claimed === 0) return after;
  }
  throw new Error('the digest job did not run');
}
