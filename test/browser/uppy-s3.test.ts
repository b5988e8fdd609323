/**
 * Uppy 6 (@uppy/aws-s3) in Chromium against Coffer's S3 endpoint, from a page of another origin,
 * in both of its modes: `getCredentials` (Uppy signs with temporary credentials the page mints from
 * its upload token) and `signRequest` (the page's server presigns each request with a long-lived
 * S3 credential, as an application's backend would). In each: a single PUT, a multipart upload,
 * and a multipart upload resumed after a reload with only its missing parts. Every file is then
 * checked through the REST API: status, bytes, metadata, folder, and its webhook events.
 */
import { createHash, randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  ListPartsCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/lib/secrets.ts';
import {
  bundleForBrowser,
  chromiumFor,
  launchChromium,
  type PageServer,
  pageCaller,
  reloadWhileHeld,
  servePage,
} from '../support/browser.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { type Endpoint, type Receiver, startReceiver } from '../support/receiver.ts';
import { newS3Credential, s3ClientOf } from '../support/s3-endpoint.ts';
import { seededBytes } from './bytes.ts';
import type { SignRequestBody, UppyPageApi, UppyUploadRequest } from './uppy/api.ts';

const MIB = 1024 * 1024;
const MULTIPART_SIZE = 24 * MIB;
const PART_SIZE = 5 * MIB;
const TYPE = 'application/octet-stream';

const chromiumPath = chromiumFor('test/browser/uppy-s3');

const inPage = pageCaller<UppyPageApi>('uppyPage');
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** The S3 operation of a request the browser sends to Coffer's /s3, undefined for any other. */
function s3Operation(method: string, url: URL): string | undefined {
  if (!url.pathname.startsWith('/s3/')) return undefined;
  const query = url.searchParams;
  if (method === 'PUT')
    return query.has('partNumber') ? `UploadPart ${query.get('partNumber')}` : 'PutObject';
  if (method === 'POST') return query.has('uploads') ? 'CreateMultipartUpload' : 'CompleteMultipartUpload';
  if (method === 'GET' && query.has('uploadId')) return 'ListParts';
  return `${method} ${url.pathname}`;
}

/**
 * What an application's backend answers Uppy's signRequest: the presigned URL of the request Uppy
 * asks for, and the signed headers besides Host the browser must send with it.
 */
async function presign(
  signer: S3Client,
  Bucket: string,
  { request, contentType: ContentType, metadata: Metadata }: SignRequestBody,
): Promise<{ url: string; headers: Record<string, string> }> {
  const { method, key: Key, uploadId: UploadId, partNumber: PartNumber } = request;
  // Metadata in signed headers, which the browser sends and CORS must let through (the SDK would
  // otherwise put them in the URL's query, which the endpoint takes as well: see its own tests).
  const headers = Object.fromEntries(
    Object.entries(Metadata).map(([name, value]) => [`x-amz-meta-${name}`, value]),
  );
  const withMetadata = { expiresIn: 600, unhoistableHeaders: new Set(Object.keys(headers)) };
  const options = { expiresIn: 600 };
  if (method === 'PUT' && PartNumber !== undefined)
    return {
      url: await getSignedUrl(signer, new UploadPartCommand({ Bucket, Key, UploadId, PartNumber }), options),
      headers: {},
    };
  if (method === 'PUT') {
    const command = new PutObjectCommand({ Bucket, Key, ContentType, Metadata });
    return { url: await getSignedUrl(signer, command, withMetadata), headers };
  }
  if (method === 'POST' && UploadId === undefined) {
    const command = new CreateMultipartUploadCommand({ Bucket, Key, ContentType, Metadata });
    return { url: await getSignedUrl(signer, command, withMetadata), headers };
  }
  const url =
    method === 'POST'
      ? await getSignedUrl(signer, new CompleteMultipartUploadCommand({ Bucket, Key, UploadId }), options)
      : method === 'GET'
        ? await getSignedUrl(signer, new ListPartsCommand({ Bucket, Key, UploadId }), options)
        : await getSignedUrl(signer, new AbortMultipartUploadCommand({ Bucket, Key, UploadId }), options);
  return { url, headers: {} };
}

describe.runIf(chromiumPath)('Uppy (@uppy/aws-s3) in Chromium, on the S3 endpoint', () => {
  const owner = `user-${randomInt(1e9)}`;
  let coffer: TestCoffer;
  let project: TestProject;
  let bucket: string;
  let receiver: Receiver;
  let hooks: Endpoint;
  let signer: S3Client;
  let pageServer: PageServer;
  let browser: Browser;
  let page: Page;
  /** The S3 operations the browser sent, in order, since the last reset. */
  const sent: string[] = [];
  /** The requests the page's server signed. */
  const signed: SignRequestBody['request'][] = [];

  const uploadToken = async (folder: string) => {
    const reply = await project.call('POST', '/upload-tokens', {
      body: {
        owner_user_id: owner,
        folder_path: folder,
        metadata: { campaign: 'spring' },
        allowed_mime_types: [TYPE],
        expires_in: 600,
      },
    });
    expect(reply.status).toBe(201);
    return reply.body.token as string;
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    hooks = receiver.endpoint();
    const script = await bundleForBrowser(fileURLToPath(new URL('./uppy/page.ts', import.meta.url)));
    pageServer = await servePage(script, {
      // The application's backend: presigns what Uppy asks for with its own S3 credential.
      '/sign': async (_request, body) => {
        const asked = JSON.parse(body.toString()) as SignRequestBody;
        signed.push(asked.request);
        return { status: 200, json: await presign(signer, bucket, asked) };
      },
    });
    coffer = await startCoffer(
      {
        COFFER_CORS_ORIGINS: pageServer.origin,
        COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        COFFER_WEBHOOK_RETRY_SCHEDULE: '0,0.5,0.5,0.5,0.5',
      },
      { workers: true, webhookCa: receiver.ca },
    );
    project = await coffer.newProject();
    bucket = (await project.call('GET', '')).body.bucket;
    const hook = await project.call('POST', '/webhooks', {
      body: { url: hooks.url, events: ['file.uploaded', 'file.ready'] },
    });
    expect(hook.status).toBe(201);
    hooks.secret = hook.body.signing_secret;
    const credential = await newS3Credential(
      coffer,
      project.id,
      ['files:read', 'files:upload'],
      'app backend',
    );
    signer = s3ClientOf(coffer, credential, { requestChecksumCalculation: 'WHEN_REQUIRED' });

    browser = await launchChromium(chromiumPath!);
    page = await browser.newPage();
    page.on('request', (request) => {
      const operation = s3Operation(request.method(), new URL(request.url()));
      if (operation) sent.push(operation);
    });
    await page.goto(pageServer.origin);
    await page.waitForFunction(() => 'uppyPage' in globalThis);
  });

  afterAll(async () => {
    await browser?.close();
    signer?.destroy();
    await pageServer?.close();
    await coffer?.close();
    await receiver?.close();
  });

  /** The events delivered for a file, once both have arrived, each signed. */
  async function eventsOf(fileId: string): Promise<string[]> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const delivered = hooks.requests.filter((request) => request.json?.data?.file_id === fileId);
      if (delivered.length >= 2 || Date.now() > deadline) {
        expect(delivered.every((request) => request.signatureValid)).toBe(true);
        return delivered.map((request) => request.json.event).sort();
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The file Uppy stored, as the REST API shows it, with its bytes, folder and events checked. */
  async function expectStored(name: string, seed: number, size: number, folder: string) {
    const listed = await project.call('GET', `/files?q=${encodeURIComponent(name)}`);
    expect(listed.status).toBe(200);
    expect(listed.body.total).toBe(1);
    const file = listed.body.items[0];
    expect(file).toMatchObject({ filename: name, status: 'ready', size_bytes: size, content_type: TYPE });
    const expected = sha256(seededBytes(seed, size));
    if (file.checksum_sha256 !== null) expect(file.checksum_sha256).toBe(expected);
    const link = await project.call('GET', `/files/${file.id}/download`);
    expect(link.status).toBe(200);
    const bytes = new Uint8Array(await (await fetch(link.body.url)).arrayBuffer());
    expect(bytes.length).toBe(size);
    expect(sha256(bytes)).toBe(expected);
    expect((await project.call('GET', `/folders/${file.folder_id}`)).body.path).toBe(folder);
    expect(await eventsOf(file.id)).toEqual(['file.ready', 'file.uploaded']);
    return file;
  }

  describe.each(['credentials', 'signed'] as const)('with %s', (mode) => {
    const folder = `uppy/${mode}`;
    /** The page's upload of a seeded file; the key is under the token's folder in either mode. */
    async function request(seed: number, size: number, multipart: boolean): Promise<UppyUploadRequest> {
      const name = `uppy-${mode}-${seed}.bin`;
      const common = { baseUrl: coffer.url, projectId: project.id, seed, size, name, type: TYPE, multipart };
      if (mode === 'credentials')
        return { ...common, mode, token: await uploadToken(folder), key: name, partSize: PART_SIZE };
      return {
        ...common,
        mode,
        key: `${folder}/${name}`,
        metadata: { camera: 'pinhole' },
        partSize: PART_SIZE,
      };
    }
    /** Credentials mode: the token's owner and metadata; signed mode: the metadata it signed. */
    const expectOwnership = (file: { owner_user_id: string | null; metadata: unknown }) =>
      mode === 'credentials'
        ? expect(file).toMatchObject({ owner_user_id: owner, metadata: { campaign: 'spring' } })
        : expect(file).toMatchObject({ owner_user_id: null, metadata: { camera: 'pinhole' } });

    it('uploads a single file with one PUT', async () => {
      const seed = randomInt(1, 2 ** 31);
      const size = 3 * MIB + 17;
      const asked = await request(seed, size, false);
      sent.length = 0;
      signed.length = 0;
      const result = await inPage(page, 'upload', asked);
      expect(sent).toEqual(['PutObject']);
      if (mode === 'signed') expect(signed.map((each) => each.method)).toEqual(['PUT']);
      else expect(result.credentialRequests).toBe(1);
      expect(result.key).toBe(`${folder}/${asked.name}`);
      expect(result.progress.at(-1)).toBe(size);
      expectOwnership(await expectStored(asked.name, seed, size, folder));
    });

    it('uploads a multipart file in parts of 5 MiB', async () => {
      const seed = randomInt(1, 2 ** 31);
      const asked = await request(seed, MULTIPART_SIZE, true);
      sent.length = 0;
      const result = await inPage(page, 'upload', asked);
      expect(sent).toEqual([
        'CreateMultipartUpload',
        ...[1, 2, 3, 4, 5].map((part) => `UploadPart ${part}`),
        'CompleteMultipartUpload',
      ]);
      expect(result.key).toBe(`${folder}/${asked.name}`);
      expect(result.location).toContain(`/s3/${bucket}/${folder}/`);
      expect(result.progress.at(-1)).toBe(MULTIPART_SIZE);
      expectOwnership(await expectStored(asked.name, seed, MULTIPART_SIZE, folder));
    });

    it.runIf(mode === 'credentials')(
      'asks for new credentials once those it has stop working, and sends the refused request again',
      async () => {
        const seed = randomInt(1, 2 ** 31);
        const size = MIB;
        const asked = await request(seed, size, false);
        // Credentials of a token that has expired since: Coffer refuses them, Uppy must mint anew.
        const expiring = await uploadToken(folder);
        const stale = await project.call('POST', '/s3-credentials/temporary', { token: expiring, body: {} });
        expect(stale.status).toBe(201);
        await coffer.services.db.query(
          "UPDATE upload_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1",
          [sha256Hex(expiring)],
        );
        sent.length = 0;
        const result = await inPage(page, 'upload', { ...asked, firstCredentials: stale.body });
        expect(result.credentialRequests).toBe(2);
        expect(sent).toEqual(['PutObject', 'PutObject']);
        expectOwnership(await expectStored(asked.name, seed, size, folder));
      },
    );

    it('resumes a multipart upload after a reload, sending only the missing parts', async () => {
      const seed = randomInt(1, 2 ** 31);
      const asked = { ...(await request(seed, MULTIPART_SIZE, true)), resume: true };

      // 1. Parts go one at a time: the third part's PUT is held, and the page reloaded under it.
      // (While a route is set, Playwright answers the preflights itself: the other tests show CORS.)
      sent.length = 0;
      const interrupted = await reloadWhileHeld(page, {
        global: 'uppyPage',
        matches: (url) => url.pathname.startsWith('/s3/') && url.searchParams.has('partNumber'),
        hold: (request) => new URL(request.url()).searchParams.get('partNumber') === '3',
        start: () => inPage(page, 'upload', asked),
      });
      expect(interrupted).toMatch(/context was destroyed|navigat/i);
      expect(sent).toEqual(['CreateMultipartUpload', 'UploadPart 1', 'UploadPart 2', 'UploadPart 3']);

      // The upload survived the reload in localStorage; the page takes it up again with the same file.
      const entries = Object.values(await inPage(page, 'resumeEntries')) as {
        uploadId: string;
        key: string;
      }[];
      expect(entries).toEqual([{ uploadId: expect.any(String), key: `${folder}/${asked.name}` }]);

      // 2. Uppy asks which parts are there (ListParts), sends the other three, and completes.
      sent.length = 0;
      signed.length = 0;
      const resumed = await inPage(page, 'upload', asked);
      expect(sent).toEqual([
        'ListParts',
        'UploadPart 3',
        'UploadPart 4',
        'UploadPart 5',
        'CompleteMultipartUpload',
      ]);
      if (mode === 'signed')
        expect(signed[0]).toEqual({
          method: 'GET',
          key: `${folder}/${asked.name}`,
          uploadId: entries[0]!.uploadId,
        });
      expect(resumed.progress[0]).toBe(2 * PART_SIZE);
      expect(resumed.progress.at(-1)).toBe(MULTIPART_SIZE);
      expect(await inPage(page, 'resumeEntries')).toEqual({});
      expectOwnership(await expectStored(asked.name, seed, MULTIPART_SIZE, folder));
    });
  });
});
