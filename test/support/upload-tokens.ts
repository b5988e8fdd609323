import { createHash } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { type Reply, startCoffer, type TestCoffer, type TestProject } from './coffer.ts';

/** The Coffer and helpers the test files of test/api/upload-tokens-*.test.ts share. */

// Set by serveUploadTokens's beforeAll for the test file that calls it.
export let coffer: TestCoffer;

/** Starts a Coffer for the calling test file. */
export function serveUploadTokens(): void {
  beforeAll(async () => {
    coffer = await startCoffer();
  });
  afterAll(() => coffer.close());
}

export const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

export function expectError(reply: Reply, status: number, code: string) {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body.error.code).toBe(code);
  expect(reply.body.error.request_id).toEqual(expect.any(String));
}

export interface Token {
  token: string;
  expires_at: string;
  constraints: { max_size: number; allowed_mime_types: string[]; max_files: number };
  folder_id: string | null;
}

/** Creates a token with the project's key (201 expected). */
export async function createToken(project: TestProject, body: Record<string, unknown> = {}): Promise<Token> {
  const reply = await project.call('POST', '/upload-tokens', { body });
  if (reply.status !== 201)
    throw new Error(`token creation failed: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

/** An initiate request with a token; `size_bytes` is declared without sending bytes. */
export const attempt = (project: TestProject, token: string, body: Record<string, unknown> = {}) =>
  project.call('POST', '/files/upload', {
    token,
    body: { filename: 'photo.png', content_type: 'image/png', size_bytes: 10, ...body },
  });

export const fileOf = async (project: TestProject, fileId: string) => {
  const reply = await project.call('GET', `/files/${fileId}`);
  expect(reply.status).toBe(200);
  return reply.body;
};
