import { CofferError, createClient } from '@coffer/client';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient as createBrowserClient } from '../../packages/client/dist/index.js';
import { upload } from '../support/files.ts';
import { translucentPng } from '../support/images.ts';
import { freePort } from '../support/net.ts';
import { bytesOf, download, type Harness, OBJECTS, sha256, startHarness } from './support/harness.ts';
import { requestsTo } from './support/http-proxy.ts';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness();
});
afterAll(async () => harness?.close());

const UNKNOWN_FILE = 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe('CofferError', () => {
  it("carries the contract's error body: status, code, message, details, request id", async () => {
    const project = await harness.coffer.newProject();
    const client = harness.client(project, { headers: { 'x-request-id': 'req-sdk-test-1' } });
    const missing = await client.files.get(project.id, UNKNOWN_FILE).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(CofferError);
    expect(missing).toBeInstanceOf(Error);
    expect(missing).toMatchObject({
      name: 'CofferError',
      status: 404,
      code: 'NOT_FOUND',
      message: expect.any(String),
      requestId: 'req-sdk-test-1',
    });

    const invalid = await client.uploadTokens.create(project.id, { expires_in: 5 }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 422, code: 'VALIDATION_ERROR', details: expect.any(Object) });
    expect((invalid as CofferError).requestId).toBe('req-sdk-test-1');

    const denied = await harness
      .client(project, { apiKey: 'coffer_live_not_a_real_key_000000000000000000000' })
      .files.list(project.id)
      .catch((e: unknown) => e);
    expect(denied).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
  });

  it('reports NETWORK_ERROR (status 0) when nothing answers, after the retries', async () => {
    const port = await freePort();
    const calls: string[] = [];
    const client = createClient({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: 'coffer_live_x',
      retry: { attempts: 2, baseDelayMs: 1 },
      fetch: (url, init) => {
        calls.push(url);
        return fetch(url, init);
      },
    });
    await expect(client.projects.get('proj_x')).rejects.toMatchObject({ status: 0, code: 'NETWORK_ERROR' });
    expect(calls).toHaveLength(2);
  });
});

describe('files', () => {
  it('lists one page, and iterates every page by cursor', async () => {
    const project = await harness.coffer.newProject();
    const client = harness.client(project);
    const ids: string[] = [];
    for (let index = 0; index < 5; index++) {
      ids.push(
        (await client.upload(project.id, bytesOf(10), { filename: `page-${index}.bin`, tags: ['paged'] })).id,
      );
    }
    await client.upload(project.id, bytesOf(10), { filename: 'other.bin' });

    const page = await client.files.list(project.id, { tags: ['paged'], limit: 2 });
    expect(page).toMatchObject({ total: 5, limit: 2, has_more: true, next_cursor: expect.any(String) });
    expect(page.items).toHaveLength(2);

    const start = harness.proxy.seen.length;
    const seen: string[] = [];
    for await (const file of client.files.iterate(project.id, { tags: ['paged'], limit: 2 }))
      seen.push(file.id);
    expect(seen).toEqual([...ids].reverse());
    const lists = requestsTo({ ...harness.proxy, seen: harness.proxy.seen.slice(start) }, 'GET', /\/files$/);
    expect(lists).toHaveLength(3);
    expect(lists.map((r) => new URL(r.url, 'http://x').searchParams.has('cursor'))).toEqual([
      false,
      true,
      true,
    ]);

    const byMetadata = await harness.client(project).files.list(project.id, { metadata: { none: 1 } });
    expect(byMetadata.total).toBe(0);
  });

  it('tags, metadata, move, legal hold, download and delete', async () => {
    const project = await harness.coffer.newProject();
    const client = harness.client(project);
    const bytes = bytesOf(64);
    const file = await client.upload(project.id, bytes, { filename: 'ops.bin', tags: ['a'] });
    expect((await client.files.addTags(project.id, file.id, ['b'])).tags.sort()).toEqual(['a', 'b']);
    expect((await client.files.setTags(project.id, file.id, ['c'])).tags).toEqual(['c']);
    await client.files.setMetadata(project.id, file.id, { x: 1 });
    expect((await client.files.mergeMetadata(project.id, file.id, { y: 2 })).metadata).toEqual({
      x: 1,
      y: 2,
    });

    const folder = await client.folders.create(project.id, { name: 'inbox' });
    expect((await client.files.move(project.id, file.id, folder.id)).folder_id).toBe(folder.id);
    expect((await client.files.move(project.id, file.id, null)).folder_id).toBeNull();

    const { url, expires_at } = await client.files.downloadUrl(project.id, file.id, { ttl: 120 });
    expect(sha256(await download(url))).toBe(sha256(bytes));
    expect(Date.parse(expires_at) - Date.now()).toBeLessThanOrEqual(121_000);

    expect((await client.files.setLegalHold(project.id, file.id, 'audit')).legal_hold).toBe(true);
    await expect(client.files.delete(project.id, file.id)).rejects.toMatchObject({
      status: 409,
      code: 'LEGAL_HOLD',
    });
    expect((await client.files.releaseLegalHold(project.id, file.id)).legal_hold).toBe(false);
    expect((await client.files.delete(project.id, file.id)).deleted_at).toEqual(expect.any(String));
    await expect(client.files.get(project.id, file.id)).rejects.toMatchObject({ status: 404 });
  });
});

describe('folders, versions, projects, tokens, schema', () => {
  it('manages folders', async () => {
    const project = await harness.coffer.newProject();
    const { folders } = harness.client(project);
    const parent = await folders.create(project.id, { name: 'photos' });
    const child = await folders.create(project.id, { name: '2024', parent_id: parent.id });
    expect(child.path).toBe('photos/2024');
    expect((await folders.list(project.id)).items.map((f) => f.id)).toEqual([parent.id]);
    expect((await folders.list(project.id, { parent_id: parent.id })).items.map((f) => f.id)).toEqual([
      child.id,
    ]);
    expect((await folders.update(project.id, child.id, { name: '2025' })).path).toBe('photos/2025');
    expect((await folders.get(project.id, child.id)).name).toBe('2025');
    await expect(folders.delete(project.id, parent.id)).rejects.toMatchObject({ status: 409 });
    await folders.delete(project.id, child.id);
    await folders.delete(project.id, parent.id);
    await expect(folders.get(project.id, parent.id)).rejects.toMatchObject({ status: 404 });
  });

  it('uploads new content as a version, lists, downloads and restores versions', async () => {
    const project = await harness.coffer.newProject({ versioning_enabled: true });
    const client = harness.client(project);
    const first = bytesOf(100);
    const file = await client.upload(project.id, first, { filename: 'v.txt' });
    const second = bytesOf(200);
    const progress: number[] = [];
    const confirmed = await client.versions.upload(project.id, file.id, second, {
      onProgress: ({ loaded }) => progress.push(loaded),
    });
    expect(confirmed).toMatchObject({
      status: 'committed',
      file: { size_bytes: 200, content_type: 'text/plain' },
    });
    expect(progress.at(-1)).toBe(200);
    const { items } = await client.versions.list(project.id, file.id);
    expect(items.map((v) => v.size_bytes)).toEqual([200, 100]);
    const oldest = items.at(-1)!;
    const { url } = await client.versions.downloadUrl(project.id, file.id, oldest.id);
    expect(sha256(await download(url))).toBe(sha256(first));
    expect((await client.versions.restore(project.id, file.id, oldest.id)).size_bytes).toBe(100);
  });

  it('reads and updates the project, creates upload tokens, manages the metadata schema', async () => {
    const project = await harness.coffer.newProject();
    const client = harness.client(project);
    expect((await client.projects.get(project.id)).id).toBe(project.id);
    const updated = await client.projects.update(project.id, { settings: { signed_url_ttl_seconds: 600 } });
    expect(updated.settings.signed_url_ttl_seconds).toBe(600);

    const token = await client.uploadTokens.create(project.id, {
      max_files: 1,
      allowed_mime_types: ['text/*'],
    });
    expect(token).toMatchObject({
      token: expect.stringMatching(/^coffer_upload_token_/),
      constraints: { max_files: 1 },
    });
    const browser = harness.client(project, { token: token.token });
    const uploaded = await browser.upload(project.id, new Blob(['hi'], { type: 'text/plain' }), {
      filename: 'hi.txt',
    });
    expect(uploaded.status).toBe('ready');
    await expect(
      browser.upload(project.id, new Blob(['again']), { filename: 'a.txt' }),
    ).rejects.toMatchObject({
      status: 403,
      code: 'TOKEN_LIMIT_REACHED',
    });

    const schema = { type: 'object', properties: { owner: { type: 'string' } } };
    expect((await client.metadataSchema.put(project.id, { schema, is_active: true })).schema).toEqual(schema);
    expect((await client.metadataSchema.get(project.id)).is_active).toBe(true);
    await client.metadataSchema.delete(project.id);
    await expect(client.metadataSchema.get(project.id)).rejects.toMatchObject({ status: 404 });

    // Any operation, typed by its path.
    const page = await client.request('get', '/v1/projects/{project_id}/files', {
      params: { project_id: project.id },
      query: { limit: 1, offset: 0 },
    });
    expect(page.items).toHaveLength(1);
  });
});

describe('the browser entry', () => {
  it('uploads through fetch where XMLHttpRequest is absent', async () => {
    const project = await harness.coffer.newProject();
    const client = createBrowserClient({ baseUrl: harness.proxy.url, apiKey: project.key });
    const bytes = bytesOf(3000);
    const events: number[] = [];
    const file = await client.upload(project.id, new Blob([bytes], { type: 'text/plain' }), {
      filename: 'browser.txt',
      onProgress: ({ loaded }) => events.push(loaded),
    });
    expect(file).toMatchObject({ content_type: 'text/plain', size_bytes: 3000, status: 'ready' });
    expect(events).toEqual([0, 3000]);
    expect(requestsTo(harness.proxy, 'PUT', OBJECTS).at(-1)!.headers['content-type']).toBe('text/plain');
  });
});

describe('rendition URLs', () => {
  it('asks downloadUrl for a rendition of an image: a URL needing no key, of the asked size and format', async () => {
    const project = await harness.coffer.newProject();
    const client = harness.client(project);
    const image = await translucentPng(120, 60);
    const reply = await upload(project, { filename: 'wide.png', content_type: 'image/png', bytes: image });
    expect(reply.status).toBe(200);
    const { url } = await client.files.downloadUrl(project.id, reply.body.id, {
      ttl: 300,
      rendition: { width: 30, format: 'webp' },
    });
    expect(new URL(url).pathname).toBe(`/renditions/${project.id}/${reply.body.id}`);
    const meta = await sharp(await download(url)).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 30, 15]);
  });
});
