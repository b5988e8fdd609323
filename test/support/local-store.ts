import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect } from 'vitest';
import { installErrorHandling } from '../../src/http/error-handler.ts';
import { objectRoutes } from '../../src/http/object-routes.ts';
import { drainRefusedBodies } from '../../src/http/refused-body.ts';
import { createLocalStore, type LocalObjectStore } from '../../src/infra/storage/local/store.ts';
import { MIN_PART_SIZE, type StoreErrorCode } from '../../src/infra/storage/object-store.ts';

/** A local store served by its object routes, as the test files of test/infra/local-*.test.ts use it. */

export const SECRET = 'test-url-signing-secret';
/** What the store's multipart uploads here declare: more than any of them stores. */
export const MULTIPART_TOTAL = 64 * 1024 * 1024;

// Set by serveLocalStore's beforeAll for the test file that calls it.
export let dir: string;
export let store: LocalObjectStore;
/** The store behind the routes: it receives the uploads (the other store is another node on the same folder). */
export let receiver: LocalObjectStore;
export let base: string;
let app: FastifyInstance;
let counter = 0;

/** Serves a fresh folder for the calling test file: the routes on `receiver`, and `store` presigning for them. */
export function serveLocalStore(): void {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'coffer-local-store-'));
    app = Fastify();
    installErrorHandling(app);
    drainRefusedBodies(app);
    // The routes only verify and store; the public URL (known once listening) only matters for presigning,
    // so a second store over the same folder and secret presigns with the real address.
    receiver = createLocalStore({ dir, publicUrl: 'http://unused', secret: SECRET });
    await app.register(objectRoutes(receiver));
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    store = createLocalStore({ dir, publicUrl: base, secret: SECRET });
  });

  afterAll(async () => {
    await app.close();
    await rm(dir, { recursive: true, force: true });
  });
}

export const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
export const md5 = (data: Buffer) => createHash('md5').update(data).digest('hex');
export const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000);
export const newKey = () => `proj_test/file_${++counter}/01HZX${String(counter).padStart(6, '0')}`;
export const tmpFiles = () => readdir(join(dir, '.tmp')).catch(() => [] as string[]);
/** A part that can come before others at complete: no smaller than S3 allows (5 MiB), and no bigger. */
export const fullPart = () => randomBytes(MIN_PART_SIZE);

export async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function expectError(response: Response, status: number, code: string) {
  expect(response.status).toBe(status);
  const body = (await response.json()) as {
    error: { code: string; message: string; details?: Record<string, unknown>; request_id: string };
  };
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toEqual(expect.any(String));
  return body.error;
}

/** What the store throws: a StoreError of `code`, with at least `details` and a `message` matching when given. */
export const storeError = (code: StoreErrorCode, details?: Record<string, unknown>, message?: RegExp) =>
  expect.objectContaining({
    name: 'StoreError',
    code,
    ...(details ? { details: expect.objectContaining(details) } : {}),
    ...(message ? { message: expect.stringMatching(message) } : {}),
  });

/** Nothing of `key` is visible or half-written. */
export async function expectNoTrace(key: string) {
  expect(await store.head(key)).toBeUndefined();
  expect(existsSync(join(dir, key))).toBe(false);
  expect(await tmpFiles()).toEqual([]);
}

export function put(url: string, body: RequestInit['body'], contentType = 'application/octet-stream') {
  return fetch(url, { method: 'PUT', body, headers: { 'content-type': contentType } });
}

function chunked(chunks: Buffer[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(new Uint8Array(chunk));
      controller.close();
    },
  });
}

export function putStream(url: string, chunks: Buffer[], contentType = 'application/octet-stream') {
  return fetch(url, {
    method: 'PUT',
    body: chunked(chunks),
    headers: { 'content-type': contentType },
    duplex: 'half',
  } as RequestInit);
}

export async function upload(data: Buffer, contentType = 'application/pdf'): Promise<string> {
  const key = newKey();
  const url = await store.presignUpload(key, { size: data.length, contentType, expiresAt: inSeconds(60) });
  const response = await put(url, data, contentType);
  expect(response.status).toBe(200);
  return key;
}
