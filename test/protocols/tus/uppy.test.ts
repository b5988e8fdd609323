/**
 * Uppy 6 with @uppy/tus in headless Chromium, from a page of another origin than Coffer's, with an
 * upload token: the file arrives in chunks and is checked through the REST API.
 */
import { createHash, randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededBytes } from '../../browser/bytes.ts';
import {
  bundleForBrowser,
  findChromium,
  launchChromium,
  type PageServer,
  servePage,
} from '../../support/browser.ts';
import { request, startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';

const MiB = 1024 * 1024;

/** What the page's `tusPage.upload` (uppy-page.js) takes and answers. */
interface UppyUpload {
  endpoint: string;
  token: string;
  seed: number;
  size: number;
  name: string;
  type: string;
  chunkSize: number;
  tags: string;
}
interface TusPageApi {
  upload(request: UppyUpload): Promise<{ uploadURL: string; progress: number[] }>;
}
const chromiumPath = findChromium();

describe.runIf(chromiumPath)('Uppy with @uppy/tus in Chromium', () => {
  let coffer: TestCoffer;
  let project: TestProject;
  let pageServer: PageServer;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    const script = await bundleForBrowser(fileURLToPath(new URL('./uppy-page.js', import.meta.url)));
    pageServer = await servePage(script);
    coffer = await startCoffer({ COFFER_CORS_ORIGINS: pageServer.origin });
    project = await coffer.newProject();
    browser = await launchChromium(chromiumPath!);
    page = await browser.newPage();
    await page.goto(pageServer.origin);
    await page.waitForFunction(() => 'tusPage' in globalThis);
  });
  afterAll(async () => {
    await browser?.close();
    await pageServer?.close();
    await coffer?.close();
  });

  it('uploads a file in chunks with an upload token, checked through REST', async () => {
    const token = await project.call('POST', '/upload-tokens', {
      body: {
        owner_user_id: `user-${randomInt(1e9)}`,
        allowed_mime_types: ['application/octet-stream'],
        expires_in: 600,
      },
    });
    expect(token.status).toBe(201);
    const upload: UppyUpload = {
      endpoint: `${coffer.url}/tus`,
      token: token.body.token,
      seed: randomInt(1e9),
      size: 11 * MiB + 5,
      name: 'report.bin',
      type: 'application/octet-stream',
      chunkSize: 5 * MiB,
      tags: 'uppy',
    };
    const result = await page.evaluate(
      (request) => (globalThis as unknown as { tusPage: TusPageApi }).tusPage.upload(request),
      upload,
    );
    expect(result.uploadURL.startsWith(`${coffer.config.publicUrl}/tus/`)).toBe(true);
    expect(result.progress.at(-1)).toBe(upload.size);

    const head = await request(result.uploadURL, 'HEAD', {
      headers: { 'tus-resumable': '1.0.0', authorization: `Bearer ${token.body.token}` },
    });
    expect(head.headers.get('upload-offset')).toBe(String(upload.size));
    const fileId = head.headers.get('x-coffer-file-id')!;
    const file = (await project.call('GET', `/files/${fileId}`)).body;
    expect(file).toMatchObject({
      status: 'ready',
      filename: 'report.bin',
      content_type: 'application/octet-stream',
      size_bytes: upload.size,
      tags: ['uppy'],
    });
    const link = await project.call('GET', `/files/${fileId}/download`);
    const bytes = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
    const expected = createHash('sha256').update(seededBytes(upload.seed, upload.size)).digest('hex');
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(expected);
  });
});
