import { createHash } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { startCoffer, type TestCoffer, type TestProject } from './coffer.ts';

/** The Coffer and helpers the test files of test/api/multipart-*.test.ts share. */

export const MiB = 1024 * 1024;

// Set by serveMultipart's beforeAll for the test file that calls it.
export let coffer: TestCoffer;

/** Starts a Coffer for the calling test file. */
export function serveMultipart(): void {
  beforeAll(async () => {
    coffer = await startCoffer();
  });
  afterAll(() => coffer.close());
}

export const md5 = (bytes: Buffer) => `"${createHash('md5').update(bytes).digest('hex')}"`;

export async function start(project: TestProject, total: number, extra: Record<string, unknown> = {}) {
  const reply = await project.call('POST', '/files/upload/multipart/start', {
    body: {
      filename: 'big.bin',
      content_type: 'application/octet-stream',
      total_size_bytes: total,
      ...extra,
    },
  });
  expect(reply.status).toBe(201);
  return reply.body as { upload_id: string; file_id: string };
}

export async function putPart(project: TestProject, uploadId: string, partNumber: number, bytes: Buffer) {
  const url = await project.call(
    'GET',
    `/files/upload/multipart/${uploadId}/part-url?part=${partNumber}&size=${bytes.length}`,
  );
  expect(url.status).toBe(200);
  const reply = await fetch(url.body.url, { method: 'PUT', body: bytes });
  expect(reply.status).toBe(200);
  return reply.headers.get('etag')!;
}

export const complete = (
  project: TestProject,
  uploadId: string,
  parts: { part_number: number; etag: string }[],
) => project.call('POST', `/files/upload/multipart/${uploadId}/complete`, { body: { parts } });
