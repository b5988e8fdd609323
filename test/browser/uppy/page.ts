/**
 * The Uppy test page's script (bundled with @uppy/core and @uppy/aws-s3 by esbuild): it runs in
 * Chromium, and the test calls what it puts on `globalThis.uppyPage` through `page.evaluate`.
 */
import AwsS3 from '@uppy/aws-s3';
import Uppy, { type UppyFile } from '@uppy/core';
import { seededBytes } from '../bytes.ts';
import { storedEntries } from '../stored.ts';
import type { SignRequestBody, TemporaryCredentials, UppyPageApi, UppyUploadRequest } from './api.ts';

/** Where the page keeps a multipart upload's state across reloads, by Uppy's file id. */
const RESUME_PREFIX = 'uppy-s3:';

/** Temporary S3 credentials for the page's upload token, minted by the browser itself. */
async function mint(request: UppyUploadRequest): Promise<TemporaryCredentials> {
  const response = await fetch(
    `${request.baseUrl}/v1/projects/${request.projectId}/s3-credentials/temporary`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${request.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ expires_in: 900 }),
    },
  );
  if (response.status !== 201)
    throw new Error(`temporary credentials: ${response.status} ${await response.text()}`);
  return (await response.json()) as TemporaryCredentials;
}

/** The plugin's options for the request's mode. */
async function signing(request: UppyUploadRequest, counted: { credentialRequests: number }) {
  if (request.mode === 'signed') {
    return {
      generateObjectKey: () => request.key,
      signRequest: async (signed: SignRequestBody['request']) => {
        const body: SignRequestBody = {
          request: signed,
          contentType: request.type,
          metadata: request.metadata ?? {},
        };
        const response = await fetch('/sign', { method: 'POST', body: JSON.stringify(body) });
        if (!response.ok) throw new Error(`signing answered ${response.status}: ${await response.text()}`);
        return (await response.json()) as { url: string; headers?: Record<string, string> };
      },
    };
  }
  // The first credentials tell the key's prefix (the token's folder); Uppy asks again on expiry.
  let first: Promise<TemporaryCredentials> | undefined = request.firstCredentials
    ? Promise.resolve(request.firstCredentials)
    : mint(request);
  const { endpoint, bucket, prefix } = await first;
  return {
    s3Endpoint: `${endpoint}/${bucket}`,
    generateObjectKey: () => `${prefix}${request.key}`,
    getCredentials: async () => {
      counted.credentialRequests += 1;
      const minted = await (first ?? mint(request));
      first = undefined;
      return {
        credentials: {
          accessKeyId: minted.access_key_id,
          secretAccessKey: minted.secret_access_key,
          sessionToken: minted.session_token,
          expiration: minted.expiration,
        },
        region: minted.region,
      };
    },
  };
}

const api: UppyPageApi = {
  async upload(request) {
    const counted = { credentialRequests: 0 };
    const uppy = new Uppy({ id: 'uppy', autoProceed: false });
    uppy.use(AwsS3, {
      ...(await signing(request, counted)),
      shouldUseMultipart: request.multipart,
      getChunkSize: () => request.partSize ?? 5 * 1024 * 1024,
      limit: 1,
    } as ConstructorParameters<typeof AwsS3>[1]);
    const progress: number[] = [];
    uppy.on('upload-progress', (_file, { bytesUploaded }) => {
      if (typeof bytesUploaded === 'number') progress.push(bytesUploaded);
    });
    if (request.resume) {
      // Uppy keeps the upload id and key on the file as soon as the upload is created: kept here
      // too, so that a reloaded page resumes it (Uppy's Golden Retriever does the same).
      uppy.on('state-update', (_previous, next) => {
        for (const [id, file] of Object.entries(next.files) as [string, UppyFile<any, any>][]) {
          if (file.s3Multipart) localStorage.setItem(RESUME_PREFIX + id, JSON.stringify(file.s3Multipart));
        }
      });
      uppy.on('upload-success', (file) => {
        if (file) localStorage.removeItem(RESUME_PREFIX + file.id);
      });
    }

    const data = new File([seededBytes(request.seed, request.size)], request.name, {
      type: request.type,
      lastModified: Date.UTC(2024, 0, 1),
    });
    const id = uppy.addFile({ name: request.name, type: request.type, data, source: 'test' });
    const kept = request.resume ? localStorage.getItem(RESUME_PREFIX + id) : null;
    if (kept) uppy.setFileState(id, { s3Multipart: JSON.parse(kept) });

    const result = await uppy.upload();
    const failed = result?.failed?.[0];
    if (failed) throw new Error(`upload failed: ${failed.error}`);
    const body = result?.successful?.[0]?.response?.body as { key: string; location: string } | undefined;
    if (!body) throw new Error(`no upload result: ${JSON.stringify(result)}`);
    uppy.destroy();
    return { key: body.key, location: body.location, progress, ...counted };
  },

  resumeEntries: () => storedEntries(RESUME_PREFIX),
};

(globalThis as { uppyPage?: UppyPageApi }).uppyPage = api;
