import { afterAll, beforeAll, expect } from 'vitest';
import { isLocalStore } from '../../src/infra/storage/local/store.ts';
import { startCoffer, type TestCoffer, type TestProject } from './coffer.ts';
import { upload } from './files.ts';

/** The Coffer and helpers the test files of test/api/renditions-*.test.ts share. */

// Set by serveRenditions's beforeAll for the test file that calls it.
export let coffer: TestCoffer;
export let project: TestProject;

/** Starts a Coffer (collecting at once) and a project in it for the calling test file. */
export function serveRenditions(): void {
  beforeAll(async () => {
    coffer = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0' });
    project = await coffer.newProject();
  });
  afterAll(() => coffer.close());
}

export async function stored(target: TestProject, filename: string, contentType: string, bytes: Buffer) {
  const reply = await upload(target, { filename, content_type: contentType, bytes });
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  expect(reply.body.status).toBe('ready');
  return reply.body as { id: string; storage_key: string };
}

export interface Rendered {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json?: any;
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<Rendered> {
  const response = await fetch(url, { headers });
  const bytes = Buffer.from(await response.arrayBuffer());
  const isJson = response.headers.get('content-type')?.startsWith('application/json');
  return {
    status: response.status,
    headers: response.headers,
    bytes,
    json: isJson ? JSON.parse(bytes.toString()) : undefined,
  };
}

export function render(
  target: TestProject,
  fileId: string,
  query: Record<string, string | number | boolean | undefined>,
  headers: Record<string, string> = {},
  on: TestCoffer = coffer,
) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) search.set(name, String(value));
  return get(`${on.url}/v1/projects/${target.id}/files/${fileId}/render?${search}`, {
    authorization: `Bearer ${target.key}`,
    ...headers,
  });
}

/**
 * Runs (and awaits) `onRead` before each time a render takes the source `key` from the store of `on`:
 * the local store is asked for its file first (a small object's bytes are read after), others read
 * it. Answers how to undo it.
 */
export function onSourceRead(on: TestCoffer, key: string, onRead: () => unknown): () => void {
  const store = on.services.store;
  if (isLocalStore(store)) {
    const ownFile = store.ownFile.bind(store);
    store.ownFile = async (fileKey) => {
      if (fileKey === key) await onRead();
      return ownFile(fileKey);
    };
    return () => {
      store.ownFile = ownFile;
    };
  }
  const read = store.read.bind(store);
  store.read = async (readKey, range) => {
    if (readKey === key) await onRead();
    return read(readKey, range);
  };
  return () => {
    store.read = read;
  };
}
