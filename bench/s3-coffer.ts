/** The Coffer side of the S3 benchmark: uploads, downloads and multipart uploads through Coffer's API. */
import { setTimeout as sleep } from 'node:timers/promises';
import { expectStatus, type Project } from './client.ts';
import { pool } from './measure.ts';
import { CONTENT_TYPE, putBytes, REQUEST_TIMEOUT_MS, seconds } from './s3-http.ts';
import type { Plan } from './s3-server.ts';

export interface CofferFile {
  id: string;
  storage_key: string;
  status: string;
  checksum_sha256: string | null;
}

export interface SingleTimes {
  initiate: number;
  put: number;
  confirm: number;
  whole: number;
}

export async function cofferUpload(
  project: Project,
  body: Buffer,
  name: string,
): Promise<{ times: SingleTimes; file: CofferFile }> {
  const t0 = performance.now();
  const started = await project.api<{ file_id: string; upload_url: string }>('POST', '/files/upload', {
    filename: name,
    content_type: CONTENT_TYPE,
    size_bytes: body.length,
  });
  expectStatus(started, 201, 'initiate');
  const t1 = performance.now();
  await putBytes(started.body.upload_url, body, CONTENT_TYPE);
  const t2 = performance.now();
  const confirmed = await project.api<CofferFile>('POST', `/files/${started.body.file_id}/confirm`);
  expectStatus(confirmed, 200, 'confirm');
  const t3 = performance.now();
  if (confirmed.body.status !== 'ready') throw new Error(`confirm: the file is ${confirmed.body.status}`);
  return {
    times: {
      initiate: seconds(t0, t1),
      put: seconds(t1, t2),
      confirm: seconds(t2, t3),
      whole: seconds(t0, t3),
    },
    file: confirmed.body,
  };
}

/**
 * Waits for the digest job that reads a new S3 object back to set its checksum (so that its read does
 * not overlap the next measurement), and checks it against the bytes sent; answers the seconds waited.
 */
export async function settle(project: Project, fileId: string, expected: string): Promise<number> {
  const start = performance.now();
  for (;;) {
    const file = await project.api<CofferFile>('GET', `/files/${fileId}`);
    expectStatus(file, 200, 'get file');
    const checksum = file.body.checksum_sha256;
    if (checksum !== null) {
      if (checksum !== expected) {
        throw new Error(`the stored object's SHA-256 ${checksum} is not the sent ${expected}`);
      }
      return seconds(start);
    }
    if (performance.now() - start > REQUEST_TIMEOUT_MS) throw new Error(`no checksum for ${fileId}`);
    await sleep(20);
  }
}

export interface MultipartTimes {
  start: number;
  parts: number;
  complete: number;
  whole: number;
}

export async function cofferMultipart(
  project: Project,
  data: Buffer,
  p: Plan,
  name: string,
): Promise<{ times: MultipartTimes; fileId: string }> {
  const total = p.parts.reduce((sum, [, length]) => sum + length, 0);
  const t0 = performance.now();
  const started = await project.api<{ upload_id: string; file_id: string }>(
    'POST',
    '/files/upload/multipart/start',
    { filename: name, content_type: CONTENT_TYPE, total_size_bytes: total },
  );
  expectStatus(started, 201, 'multipart start');
  const session = `/files/upload/multipart/${started.body.upload_id}`;
  const t1 = performance.now();
  const etags: string[] = [];
  await pool(p.parts.length, p.inFlight, async (i) => {
    const [offset, length] = p.parts[i]!;
    const part = await project.api<{ url: string }>(
      'GET',
      `${session}/part-url?part=${i + 1}&size=${length}`,
    );
    expectStatus(part, 200, `part URL ${i + 1}`);
    etags[i] = await putBytes(part.body.url, data.subarray(offset, offset + length));
  });
  const t2 = performance.now();
  const completed = await project.api<CofferFile>('POST', `${session}/complete`, {
    parts: etags.map((etag, i) => ({ part_number: i + 1, etag })),
  });
  expectStatus(completed, 200, 'multipart complete');
  const t3 = performance.now();
  if (completed.body.status !== 'ready') throw new Error(`complete: the file is ${completed.body.status}`);
  return {
    times: {
      start: seconds(t0, t1),
      parts: seconds(t1, t2),
      complete: seconds(t2, t3),
      whole: seconds(t0, t3),
    },
    fileId: started.body.file_id,
  };
}
