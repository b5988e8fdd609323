/**
 * @coffer/client in a real browser: headless Chromium loads a page from another origin than
 * Coffer's, with the SDK's browser entry bundled by esbuild, and uploads through an upload token:
 * multipart with progress, a reload mid-upload and a resume that sends only the missing parts, a
 * token that expires and is refreshed, and a cross-origin download of the same bytes.
 */
import { createHash, randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Browser, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/lib/secrets.ts';
import { storage } from '../support/backends.ts';
import {
  allowBucketCors,
  bundleForBrowser,
  chromiumFor,
  launchChromium,
  type PageServer,
  pageCaller,
  reloadWhileHeld,
  servePage,
} from '../support/browser.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { seededBytes } from './bytes.ts';
import type { PageApi, UploadRequest } from './page.ts';

const MIB = 1024 * 1024;
const SIZE = 24 * MIB;

const chromiumPath = chromiumFor('test/browser');

const inPage = pageCaller<PageApi>('cofferPage');

/** Whether `url` is a presigned part URL: `upload` and `part` on the local store, `partNumber` on S3. */
function isPartUrl(url: URL): boolean {
  const query = url.searchParams;
  return query.has('partNumber') || (query.has('upload') && query.has('part'));
}

/** The part number of a part PUT the browser sends, undefined for any other request. */
function partOf(request: Request): number | undefined {
  const url = new URL(request.url());
  if (request.method() !== 'PUT' || !isPartUrl(url)) return undefined;
  return Number(url.searchParams.get('partNumber') ?? url.searchParams.get('part'));
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Progress as a user sees it: from what is already stored, only growing, ending at the total. */
function expectProgress(events: { loaded: number; total: number }[], stored: number) {
  expect(events.length).toBeGreaterThan(2);
  expect(events.every((event) => event.total === SIZE)).toBe(true);
  expect(events[0]!.loaded).toBe(stored);
  for (let i = 1; i < events.length; i++) expect(events[i]!.loaded).toBeGreaterThan(events[i - 1]!.loaded);
  expect(events.at(-1)!.loaded).toBe(SIZE);
}

describe.runIf(chromiumPath)('the SDK in Chromium, from another origin', () => {
  const owner = `user-${randomInt(1e9)}`;
  let coffer: TestCoffer;
  let project: TestProject;
  let pageServer: PageServer;
  let browser: Browser;
  let page: Page;
  let restoreCors: (() => Promise<void>) | undefined;
  /** Part numbers of the part PUTs the browser sent since the last reset. */
  const partsSent: number[] = [];
  /** Tokens the page's refreshToken asked its server for. */
  let tokensHanded = 0;

  /** A token for the browser, made with the project's API key as an application's backend would. */
  async function newToken(): Promise<string> {
    const reply = await project.call('POST', '/upload-tokens', {
      body: { owner_user_id: owner, allowed_mime_types: ['application/octet-stream'], expires_in: 600 },
    });
    expect(reply.status).toBe(201);
    return reply.body.token;
  }

  const request = (seed: number, options: Partial<UploadRequest>): UploadRequest => ({
    baseUrl: coffer.url,
    projectId: project.id,
    token: '',
    seed,
    size: SIZE,
    name: `browser-${seed}.bin`,
    ...options,
  });

  /** The page fetches the file's download URL (made with the API key) and digests what it gets. */
  async function expectDownload(file: { id: string; checksum_sha256: string | null }, seed: number) {
    const expected = sha256(seededBytes(seed, SIZE));
    if (file.checksum_sha256 !== null) expect(file.checksum_sha256).toBe(expected);
    const link = await project.call('GET', `/files/${file.id}/download`);
    expect(link.status).toBe(200);
    expect(new URL(link.body.url).origin).not.toBe(pageServer.origin);
    expect(await inPage(page, 'download', link.body.url)).toEqual({
      status: 200,
      size: SIZE,
      sha256: expected,
    });
  }

  beforeAll(async () => {
    const script = await bundleForBrowser(fileURLToPath(new URL('./page.ts', import.meta.url)));
    pageServer = await servePage(script, {
      // The page's refreshToken: an application's backend handing its user a fresh token.
      '/token': async () => {
        tokensHanded += 1;
        return { status: 200, json: { token: await newToken() } };
      },
    });
    coffer = await startCoffer({ COFFER_CORS_ORIGINS: pageServer.origin });
    project = await coffer.newProject();
    if (storage === 's3') restoreCors = await allowBucketCors(pageServer.origin);
    browser = await launchChromium(chromiumPath!);
    page = await browser.newPage();
    page.on('request', (sent) => {
      const part = partOf(sent);
      if (part !== undefined) partsSent.push(part);
    });
    await page.goto(pageServer.origin);
    await page.waitForFunction(() => 'cofferPage' in globalThis);
  });

  afterAll(async () => {
    await browser?.close();
    await restoreCors?.();
    await coffer?.close();
    await pageServer?.close();
  });

  it('uploads 24 MiB in parts through an upload token, with progress, and downloads the same bytes', async () => {
    const seed = randomInt(1, 2 ** 31);
    partsSent.length = 0;
    const { file, progress } = await inPage(page, 'upload', request(seed, { token: await newToken() }));
    expect(file).toMatchObject({
      status: 'ready',
      size_bytes: SIZE,
      filename: `browser-${seed}.bin`,
      content_type: 'application/octet-stream',
      owner_user_id: owner,
    });
    // The SDK's defaults: multipart above 16 MiB, 8 MiB parts.
    expect(partsSent.sort((a, b) => a - b)).toEqual([1, 2, 3]);
    expectProgress(progress, 0);
    await expectDownload(file, seed);
  });

  it('resumes after a reload with only the missing parts, on a refreshed token of the same owner', async () => {
    const seed = randomInt(1, 2 ** 31);
    const partSize = 5 * MIB;
    const parts = Math.ceil(SIZE / partSize);
    const expiring = await newToken();

    // 1. One part at a time; the third part's PUT is held, and the page reloaded under it.
    partsSent.length = 0;
    const interrupted = await reloadWhileHeld(page, {
      global: 'cofferPage',
      matches: isPartUrl,
      hold: (sent) => partOf(sent) === 3,
      start: () =>
        inPage(page, 'upload', request(seed, { token: expiring, partSize, concurrency: 1, resume: true })),
    });
    expect(interrupted).toMatch(/context was destroyed|navigat/i);
    expect(partsSent).toEqual([1, 2, 3]);

    // The session survived the reload in localStorage, and the server holds parts 1 and 2.
    const entries = Object.values(await inPage(page, 'resumeEntries')) as {
      uploadId: string;
      fileId: string;
    }[];
    expect(entries).toHaveLength(1);
    const { uploadId, fileId } = entries[0]!;
    const session = await project.call('GET', `/files/upload/multipart/${uploadId}`);
    expect(session.status).toBe(200);
    expect(session.body.status).toBe('open');
    const stored = (session.body.parts as { part_number: number }[]).map((part) => part.part_number);
    expect(stored.sort((a, b) => a - b)).toEqual([1, 2]);

    // 2. The page's token has expired meanwhile: the SDK must refresh it once, then resume.
    await coffer.services.db.query(
      "UPDATE upload_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1",
      [sha256Hex(expiring)],
    );
    partsSent.length = 0;
    tokensHanded = 0;
    const resumed = await inPage(
      page,
      'upload',
      request(seed, { token: expiring, refreshPath: '/token', partSize, resume: true }),
    );
    expect(resumed.refreshes).toBe(1);
    expect(tokensHanded).toBe(1);
    expect(partsSent.length).toBeLessThan(parts);
    expect(partsSent.sort((a, b) => a - b)).toEqual([3, 4, 5]);
    expect(resumed.file).toMatchObject({ id: fileId, status: 'ready', size_bytes: SIZE });
    expectProgress(resumed.progress, 2 * partSize);
    expect(await inPage(page, 'resumeEntries')).toEqual({});
    await expectDownload(resumed.file, seed);
  });
});
