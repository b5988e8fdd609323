/** The two-step presigned upload the benchmarks drive: initiate, PUT to the upload URL, confirm. */
import type { Readable } from 'node:stream';
import { request } from 'undici';
import { agent, expectStatus, type Project } from './client.ts';

export const CONTENT_TYPE = 'application/octet-stream';

export interface Initiated {
  file_id: string;
  upload_url: string;
}

export async function initiate(project: Project, filename: string, size: number): Promise<Initiated> {
  const reply = await project.api<Initiated>('POST', '/files/upload', {
    filename,
    content_type: CONTENT_TYPE,
    size_bytes: size,
  });
  expectStatus(reply, 201, 'initiate');
  return reply.body;
}

export async function put(url: string, size: number, body: Buffer | Readable): Promise<void> {
  const response = await request(url, {
    method: 'PUT',
    headers: { 'content-type': CONTENT_TYPE, 'content-length': String(size) },
    body,
    dispatcher: agent,
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`PUT: expected 200, got ${response.statusCode} ${text}`);
}

export async function confirm(
  project: Project,
  fileId: string,
): Promise<{ status: string; checksum_sha256: string }> {
  const reply = await project.api('POST', `/files/${fileId}/confirm`);
  expectStatus(reply, 200, 'confirm');
  return reply.body;
}
