/**
 * The web console in Chromium, as a person uses it: sign in (a wrong key first), upload three
 * files at once (one in parts), search, filter, open one, edit its tags and metadata, delete one,
 * create a webhook and watch its deliveries, change settings, create an upload token, and manage
 * organizations, projects and API keys with the admin key. A file named like HTML shows as text.
 * Each main screen is saved as a screenshot under .tmp/console/ (CI keeps them as artifacts).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import type { Browser, BrowserContext, Page, Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eicarTestFile } from '../../src/infra/scanner/index.ts';
import { storage } from '../support/backends.ts';
import { allowBucketCors, chromiumFor, launchChromium } from '../support/browser.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { upload } from '../support/files.ts';
import { type Endpoint, type Receiver, startReceiver } from '../support/receiver.ts';

// What the callbacks of page.evaluate see in the page (the project's types have no DOM library).
declare const document: any;
declare const window: any;
declare const navigator: any;
declare const sessionStorage: any;
declare const localStorage: any;

const MIB = 1024 * 1024;
const SHOTS = join(process.cwd(), '.tmp', 'console');
const XSS_NAME = '<img src=x onerror=alert(1)>.png';

const chromiumPath = chromiumFor('test/browser/console');

/** A real PNG (a gradient), so that the preview has something to show and the MIME check passes. */
function png(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(data.length + 12);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), data.length + 8);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bits per channel
  header[9] = 2; // RGB
  const stride = width * 3 + 1;
  const pixels = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      pixels.set([(x * 255) / width, (y * 255) / height, 160], y * stride + 1 + x * 3);
    }
  }
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Whether a request is a presigned part PUT: `upload` and `part` locally, `partNumber` on S3. */
const isPart = (method: string, url: URL) =>
  method === 'PUT' && (url.searchParams.has('partNumber') || url.searchParams.has('part'));

describe.runIf(chromiumPath)('the console in Chromium', () => {
  let receiver: Receiver;
  let endpoint: Endpoint;
  let coffer: TestCoffer;
  let project: TestProject;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let restoreCors: (() => Promise<void>) | undefined;
  /** Origins the page may reach: Coffer's, and the store's presigned URLs'. */
  const allowed = new Set<string>();
  const outside: string[] = [];
  const problems: string[] = [];
  const dialogs: string[] = [];
  const listLimits: number[] = [];
  let partPuts = 0;

  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const hash = () => page.evaluate(() => window.location.hash);
  const inTable = () =>
    page.$$eval('.files-table .file-link', (links) => links.map((link) => link.textContent));
  /** Waits until the file list shows exactly `names` (newest first). */
  const tableShows = (names: string[]) =>
    page.waitForFunction(
      (expected) =>
        JSON.stringify(
          [...document.querySelectorAll('.files-table .file-link')].map((a) => a.textContent),
        ) === JSON.stringify(expected),
      names,
    );
  const apiFile = async (id: string) => (await project.call('GET', `/files/${id}`)).body;
  const idOf = async (name: string) =>
    (await project.call('GET', `/files?q=${encodeURIComponent(name)}`)).body.items.find(
      (file: { filename: string }) => file.filename === name,
    ).id as string;

  async function signIn(key: string) {
    const field = page.getByLabel('API key or admin key');
    await field.fill(key);
    await field.press('Enter'); // the keyboard is enough
  }

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    receiver = await startReceiver();
    endpoint = receiver.endpoint();
    coffer = await startCoffer(
      { COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', COFFER_WEBHOOK_RETRY_SCHEDULE: '0,0.5,0.5,0.5,0.5' },
      { workers: true, webhookCa: receiver.ca },
    );
    project = await coffer.newProject({ virus_scan_enabled: true, versioning_enabled: true });
    const storeUrl = await coffer.services.store.presignGet('probe/origin', {
      expiresAt: new Date(Date.now() + 60_000),
      filename: 'x',
      contentType: 'application/octet-stream',
    });
    // Coffer's own, the store's presigned URLs', and presigned renditions' (Coffer's public URL).
    for (const origin of [coffer.url, new URL(storeUrl).origin, coffer.config.publicUrl])
      allowed.add(new URL(origin).origin);
    if (storage === 's3') restoreCors = await allowBucketCors(coffer.url);

    browser = await launchChromium(chromiumPath!);
    context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: coffer.url });
    page = await context.newPage();
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (!allowed.has(url.origin)) outside.push(request.url());
      if (isPart(request.method(), url)) partPuts += 1;
      if (request.method() === 'GET' && url.pathname === `/v1/projects/${project.id}/files`)
        listLimits.push(Number(url.searchParams.get('limit')));
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      // An answer of 4xx is part of the scenario (a wrong key); anything else said in red is not.
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource'))
        problems.push(message.text());
    });
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
  });

  afterAll(async () => {
    await browser?.close();
    await restoreCors?.();
    await coffer?.close();
    await receiver?.close();
  });

  it("signs in: a wrong key shows the API's message; the key stays in sessionStorage only", async () => {
    await page.goto(`${coffer.url}/console`);
    await page.getByRole('heading', { name: 'Coffer console' }).waitFor();
    await shot('sign-in');

    await signIn('coffer_live_this_key_does_not_exist_000000000');
    const refused = page.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toBe('The API key or upload token is unknown or revoked');

    await signIn(project.key);
    await page.getByRole('heading', { name: 'Files', exact: true }).waitFor();
    expect(await hash()).toBe(`#/p/${project.id}/files`);
    await page.getByText('No files yet').waitFor();
    await shot('files-empty');

    const kept = await page.evaluate(() => ({
      session: Object.values(sessionStorage),
      local: Object.values(localStorage),
      cookie: document.cookie,
      url: window.location.href,
    }));
    expect(kept.session).toEqual([project.key]);
    expect(kept.local.join()).not.toContain(project.key);
    expect(kept.cookie).toBe('');
    expect(kept.url).not.toContain(project.key);
    expect(await context.cookies()).toEqual([]);
  });

  it('uploads three files at once, the large one in parts, and follows each to ready', async () => {
    const big = randomBytes(17 * MIB);
    await page.locator('input[type=file]').setInputFiles([
      { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('Meeting notes\n') },
      { name: 'photo.png', mimeType: 'image/png', buffer: png(96, 64) },
      { name: 'big.bin', mimeType: 'application/octet-stream', buffer: big },
    ]);
    await page.waitForFunction(() => document.querySelectorAll('.upload-row').length === 3);
    await page.waitForFunction(
      () => document.querySelectorAll('.upload-row[data-state="ready"]').length === 3,
      null,
      { timeout: 45_000 },
    );
    expect(
      await page.$$eval('.upload-row .upload-state', (states) => states.map((s) => s.textContent)),
    ).toEqual(['Ready', 'Ready', 'Ready']);
    expect(partPuts).toBeGreaterThanOrEqual(3); // 17 MiB in parts of 8 MiB
    await page.waitForFunction(() => document.querySelectorAll('.files-table .file-link').length === 3);
    expect((await inTable()).sort()).toEqual(['big.bin', 'notes.txt', 'photo.png']);
    await page.waitForFunction(() => document.querySelectorAll('.files-table .badge.ready').length === 3);
    await shot('upload');

    const listed = (await project.call('GET', '/files')).body;
    expect(listed.total).toBe(3);
    const bigFile = listed.items.find((file: { filename: string }) => file.filename === 'big.bin');
    expect(bigFile).toMatchObject({ status: 'ready', size_bytes: big.length });
  });

  it('shows why a file is quarantined, and cancels an upload in flight', async () => {
    await page
      .locator('input[type=file]')
      .setInputFiles([{ name: 'eicar.txt', mimeType: 'text/plain', buffer: eicarTestFile() }]);
    const quarantined = page.locator('.upload-row[data-state="quarantined"]', { hasText: 'eicar.txt' });
    await quarantined.waitFor({ timeout: 30_000 });
    expect(await quarantined.locator('.upload-state').textContent()).toMatch(
      /^Quarantined: virus_detected · \S/,
    );
    const listed = page.locator('.files-table tr', { hasText: 'eicar.txt' });
    await listed.locator('.badge.quarantined').waitFor();
    expect(await listed.locator('.reason').textContent()).toMatch(/^virus_detected · \S/);
    await listed.getByRole('link', { name: 'eicar.txt' }).click();
    const panel = page.locator('aside.detail');
    await panel.getByText('This file is quarantined: it can only be deleted.').waitFor();
    expect(await panel.locator('dl.fields').textContent()).toContain('virus_detected');
    expect(await panel.getByRole('button').allTextContents()).toEqual(['Close', 'Delete']);
    await page.keyboard.press('Escape');

    // The store never answers this PUT: the upload is cancelled while its bytes are on their way.
    const held: Route[] = [];
    await page.route('**/*', (route) =>
      route.request().method() === 'PUT' ? void held.push(route) : route.continue(),
    );
    await page
      .locator('input[type=file]')
      .setInputFiles([
        { name: 'stalled.bin', mimeType: 'application/octet-stream', buffer: randomBytes(1024) },
      ]);
    await expect.poll(() => held.length).toBe(1);
    await page.getByRole('button', { name: 'Cancel the upload of stalled.bin' }).click();
    await page.locator('.upload-row[data-state="cancelled"]', { hasText: 'stalled.bin' }).waitFor();
    await page.unroute('**/*');
    await Promise.all(held.map((route) => route.abort().catch(() => undefined)));

    // The list as the next tests expect it: three files. (The cancelled upload stays `uploading` until
    // its URL expires, then `failed`: the API keeps every file it was asked for.)
    await page.getByRole('button', { name: 'Clear finished' }).click();
    for (const name of ['eicar.txt', 'stalled.bin'])
      await project.call('DELETE', `/files/${await idOf(name)}`);
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('.files-table .file-link').length === 3);
  });

  it('searches by name, and filters by size and category', async () => {
    const search = page.getByRole('searchbox', { name: 'Search file names' });
    await search.fill('phot');
    await tableShows(['photo.png']);
    expect(await page.locator('.page-summary').textContent()).toBe('1–1 of 1 files');
    await search.fill('');
    await page.waitForFunction(() => document.querySelectorAll('.files-table .file-link').length === 3);

    await page.getByLabel('Min size').fill('1 MB');
    await tableShows(['big.bin']);
    await page.getByLabel('Min size').fill('lots');
    await page.getByText('Write a size such as 500 KB, 10 MB or 2 GB.').waitFor();
    await page.getByLabel('Min size').fill('');
    await page.getByLabel('Category').selectOption('image');
    await tableShows(['photo.png']);
    await shot('filters');
    await page.getByLabel('Category').selectOption('');
    await page.getByLabel('Status').selectOption('failed');
    await page.getByText('No files match these filters').waitFor();
    await page.getByRole('button', { name: 'Clear filters' }).first().click();
    await page.waitForFunction(() => document.querySelectorAll('.files-table .file-link').length === 3);
    // Only pages are ever asked for, never every file.
    expect(listLimits.length).toBeGreaterThan(0);
    expect(listLimits.every((limit) => limit > 0 && limit <= 200)).toBe(true);
  });

  it('opens a file with the keyboard: every field, an image preview, tags and metadata edited', async () => {
    const id = await idOf('photo.png');
    await page.getByRole('link', { name: 'photo.png' }).focus();
    await page.keyboard.press('Enter');
    const panel = page.locator('aside.detail');
    await panel.getByRole('heading', { name: 'photo.png' }).waitFor();
    expect(await hash()).toBe(`#/p/${project.id}/files/${id}`);
    const fields = await panel.locator('dl.fields dt').allTextContents();
    expect(fields).toEqual(
      expect.arrayContaining(['ID', 'Name', 'Status', 'Size', 'SHA-256', 'Created', 'Legal hold']),
    );
    expect(await panel.locator('dl.fields').textContent()).toContain(id);
    await page.waitForFunction(() => (document.querySelector('.preview img')?.naturalWidth ?? 0) > 0);
    const preview = await panel.locator('.preview img').getAttribute('src');
    expect(allowed.has(new URL(preview!).origin)).toBe(true);
    // A rendition, and a thumbnail of it beside its name in the list.
    expect(new URL(preview!).pathname).toBe(`/renditions/${project.id}/${id}`);
    await page.waitForFunction(
      (selector) =>
        ((document.querySelector(selector) as { naturalWidth?: number } | null)?.naturalWidth ?? 0) > 0,
      `tr[data-id="${id}"] .thumb img`,
    );
    await shot('detail');

    const addTags = panel.getByLabel('Add tags');
    await addTags.fill('holiday');
    await addTags.press('Enter');
    await panel.getByRole('button', { name: 'Save tags' }).click();
    await panel
      .getByRole('region', { name: 'Tags' })
      .getByRole('status')
      .filter({ hasText: 'Saved' })
      .waitFor();
    expect((await apiFile(id)).tags).toEqual(['holiday']);
    await page.locator(`tr[data-id="${id}"] .chip`, { hasText: 'holiday' }).waitFor();

    const metadata = panel.getByLabel('Metadata (JSON object)');
    await metadata.fill('{"album": ');
    await panel.getByRole('button', { name: 'Save metadata' }).click();
    await panel.getByText(/This is not valid JSON/).waitFor();
    expect(await metadata.getAttribute('aria-invalid')).toBe('true');
    // With an enforced schema, a refused write names the rule broken, on the field.
    await project.call('PUT', '/metadata-schema', {
      body: { schema: { type: 'object', properties: { album: { type: 'string' } } }, is_active: true },
    });
    await project.call('PATCH', '', { body: { settings: { enforce_schema: true } } });
    await metadata.fill('{"album": 7}');
    await panel.getByRole('button', { name: 'Save metadata' }).click();
    await panel
      .getByText(/metadata does not match the project metadata schema\n\/album: must be string/)
      .waitFor();
    expect(await metadata.getAttribute('aria-invalid')).toBe('true');
    await metadata.fill('{"album": "Lisbon"}');
    await panel.getByRole('button', { name: 'Save metadata' }).click();
    await panel
      .getByRole('region', { name: 'Metadata' })
      .getByRole('status')
      .filter({ hasText: 'Saved' })
      .waitFor();
    expect(await metadata.getAttribute('aria-invalid')).toBeNull();
    expect((await apiFile(id)).metadata).toEqual({ album: 'Lisbon' });
    await panel.locator('.version', { hasText: 'Version 1 (current)' }).waitFor(); // versioning is on

    await page.keyboard.press('Escape');
    await panel.waitFor({ state: 'hidden' });
    expect(await hash()).toBe(`#/p/${project.id}/files`);
  });

  it('deletes a file after a confirmation', async () => {
    const id = await idOf('notes.txt');
    await page.getByRole('link', { name: 'notes.txt' }).click();
    const panel = page.locator('aside.detail');
    await panel.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: 'Delete notes.txt?' }).waitFor();
    await shot('delete');
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await page.getByText('notes.txt was deleted.').waitFor();
    expect((await inTable()).sort()).toEqual(['big.bin', 'photo.png']);
    expect((await project.call('GET', `/files/${id}`)).status).toBe(404);
  });

  it('creates a folder, moves a file into it, and places and releases a legal hold', async () => {
    const folders = page.locator('aside.folders');
    await folders.getByRole('button', { name: 'New folder' }).click();
    const create = page.getByRole('dialog');
    await create.getByLabel('Name').fill('archive');
    await create.getByRole('button', { name: 'Create' }).click();
    await folders.getByRole('button', { name: 'archive', exact: true }).waitFor();

    const id = await idOf('big.bin');
    await page.getByRole('link', { name: 'big.bin' }).click();
    const panel = page.locator('aside.detail');
    await panel.getByRole('heading', { name: 'big.bin' }).waitFor();
    await panel.getByRole('button', { name: 'Move' }).click();
    const move = page.getByRole('dialog');
    await move.getByRole('button', { name: 'archive', exact: true }).click();
    await move.getByRole('button', { name: 'Move here' }).click();
    await panel.getByText('Moved.').waitFor();
    const folderId = (await apiFile(id)).folder_id;
    expect((await project.call('GET', `/folders/${folderId}`)).body.name).toBe('archive');
    await folders.getByRole('button', { name: 'archive', exact: true }).click();
    await tableShows(['big.bin']);
    await folders.getByRole('button', { name: 'All files' }).click();
    await page.waitForFunction(() => document.querySelectorAll('.files-table .file-link').length === 2);

    await panel.getByRole('button', { name: 'Place legal hold' }).click();
    const hold = page.getByRole('dialog');
    await hold.getByLabel('Reason (optional)').fill('audit 2026');
    await hold.getByRole('button', { name: 'Place hold' }).click();
    await panel.getByText('Legal hold placed.').waitFor();
    expect((await apiFile(id)).legal_hold).toBe(true);
    expect(await panel.getByRole('button', { name: 'Delete' }).isDisabled()).toBe(true);
    await panel.getByRole('button', { name: 'Release legal hold' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Release' }).click();
    await panel.getByText('Legal hold released.').waitFor();
    expect((await apiFile(id)).legal_hold).toBe(false);
    await page.keyboard.press('Escape');
    await panel.waitFor({ state: 'hidden' });
  });

  it('shows a file named like HTML as text, and runs nothing of it', async () => {
    await page
      .locator('input[type=file]')
      .setInputFiles([{ name: XSS_NAME, mimeType: 'image/png', buffer: png(8, 8) }]);
    await page.getByRole('link', { name: XSS_NAME }).waitFor({ timeout: 30_000 });
    await page.getByRole('link', { name: XSS_NAME }).click();
    await page.locator('aside.detail').getByRole('heading', { name: XSS_NAME }).waitFor();
    await page.waitForFunction(() => (document.querySelector('.preview img')?.naturalWidth ?? 0) > 0);
    const seen = await page.evaluate((name) => {
      const texts = [...document.querySelectorAll('.file-link, .upload-name, .detail-title')].map(
        (e) => e.textContent,
      );
      return {
        texts: texts.filter((text) => text === name).length,
        injected: document.querySelectorAll('img[src="x"], img[onerror]').length,
      };
    }, XSS_NAME);
    expect(seen).toEqual({ texts: 3, injected: 0 });
    expect(dialogs).toEqual([]);
  });

  it('creates a webhook, shows its secret once with a copy button, and logs a delivery', async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByText('No webhooks yet').waitFor();
    await page.getByLabel('Endpoint URL').fill(endpoint.url);
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secret = page.getByRole('textbox', { name: 'Signing secret' });
    await secret.waitFor();
    const value = await secret.inputValue();
    expect(value).toMatch(/^whsec_/);
    endpoint.secret = value;
    await page.getByRole('button', { name: 'Copy Signing secret' }).click();
    await page.getByText('Copied').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(value);
    await shot('webhooks');

    const uploaded = await upload(project, { filename: 'after-hook.txt' });
    await page.getByRole('link', { name: 'Deliveries' }).click();
    const delivered = page.locator('tr', { hasText: 'file.uploaded' }).filter({ hasText: 'delivered' });
    await delivered.waitFor({ timeout: 20_000 });
    const cells = await delivered.locator('td').allTextContents();
    expect(cells.slice(0, 4)).toEqual(['file.uploaded', 'delivered', '1', '200']);
    const received = await endpoint.waitFor(1);
    expect(received[0]!.signatureValid).toBe(true);
    expect(
      received.some(
        (request) =>
          request.json?.data?.file_id === uploaded.body.id || request.json?.data?.id === uploaded.body.id,
      ),
    ).toBe(true);
    await shot('deliveries');

    const before = endpoint.requests.length;
    await delivered.getByRole('button', { name: /^Redeliver/ }).click();
    await page.getByText('file.uploaded is being sent again.').waitFor();
    await endpoint.waitFor(before + 1);
  });

  it('edits project settings, with the reason of a value refused on its field, and creates an upload token', async () => {
    await page.getByRole('link', { name: 'Settings' }).click();
    const ttl = page.getByLabel('Download URL lifetime (seconds)');
    await ttl.waitFor();
    await ttl.fill('30');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('At least 60.').waitFor();
    await ttl.fill('600');
    const types = page.getByLabel('Allowed MIME types');
    await types.fill('image/png, not a type');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText(/allowed_mime_types has a malformed entry/).waitFor();
    expect(await types.getAttribute('aria-invalid')).toBe('true');
    await types.fill('');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Settings saved.').waitFor();
    expect((await project.call('GET', '')).body.settings).toMatchObject({
      signed_url_ttl_seconds: 600,
      allowed_mime_types: null,
    });

    await page.getByLabel('Files', { exact: true }).fill('3');
    await page.getByRole('button', { name: 'Create upload token' }).click();
    const token = page.getByRole('textbox', { name: 'Upload token' });
    await token.waitFor();
    expect(await token.inputValue()).toMatch(/^coffer_upload_token_/);
    await page.getByRole('button', { name: 'Copy Upload token' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(await token.inputValue());
    await shot('settings');
  });

  it('signs out, which forgets the key', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key or admin key').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.reload();
    await page.getByLabel('API key or admin key').waitFor();
  });

  it('with the admin key: creates an organization, a project and an API key shown once', async () => {
    await signIn(ADMIN_KEY);
    await page.getByRole('heading', { name: 'Administration' }).waitFor();
    await page.getByLabel('New organization').fill('Console org');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await page.getByText('No projects in this organization').waitFor();
    await page.getByLabel('New project').fill('Console project');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByText('No API keys for this project').waitFor();
    const [, , organizationId, projectId] = (await hash()).split('/');
    await page.getByLabel('Name', { exact: true }).fill('ci');
    await page.getByLabel('files:delete').uncheck();
    await page.getByRole('button', { name: 'Create API key' }).click();
    const key = page.getByRole('textbox', { name: 'New API key' });
    await key.waitFor();
    const value = await key.inputValue();
    await page.getByRole('button', { name: 'Copy New API key' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(value);
    await shot('admin');

    const identity = await coffer.call('GET', '/v1/whoami', { token: value });
    expect(identity.body).toMatchObject({ kind: 'api_key', project_id: projectId });
    expect(identity.body.scopes).not.toContain('files:delete');
    const projects = await coffer.call('GET', `/v1/organizations/${organizationId}/projects`, {
      token: ADMIN_KEY,
    });
    expect(projects.body.items.map((p: { name: string }) => p.name)).toEqual(['Console project']);

    await page.getByRole('link', { name: 'Open files' }).click();
    await page.getByText('No files yet').waitFor();
  });

  it('reached nothing but Coffer and its store, and logged no error', () => {
    expect(outside).toEqual([]);
    expect(problems).toEqual([]);
    expect(dialogs).toEqual([]);
  });
});
