/**
 * The test page's script (bundled with the SDK's browser entry by esbuild): it runs in Chromium,
 * and the test calls what it puts on `globalThis.cofferPage` through `page.evaluate`.
 */
import { createClient, type FileObject, isCofferError, type Progress } from '@coffer/client';
import { seededBytes } from './bytes.ts';
import { storedEntries } from './stored.ts';

const RESUME_PREFIX = 'coffer-upload:';

export interface UploadRequest {
  baseUrl: string;
  projectId: string;
  token: string;
  /** A path of the page's own server that answers `{ token }`: the client's refreshToken. */
  refreshPath?: string;
  /** The File: `size` bytes made from `seed`, the same after a reload (and so is its lastModified). */
  seed: number;
  size: number;
  name: string;
  partSize?: number;
  concurrency?: number;
  resume?: boolean;
}

export interface UploadResult {
  file: FileObject;
  progress: Progress[];
  /** How often the client called refreshToken. */
  refreshes: number;
}

export interface Download {
  status: number;
  size: number;
  sha256: string;
}

export interface PageApi {
  upload(request: UploadRequest): Promise<UploadResult>;
  /** The resumable sessions the SDK keeps in localStorage. */
  resumeEntries(): Record<string, unknown>;
  /** GETs `url` (another origin: CORS) and digests what it serves. */
  download(url: string): Promise<Download>;
}

const hex = (digest: ArrayBuffer) =>
  Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('');

/** An Error that page.evaluate carries back with the SDK's code and status in its message. */
function described(error: unknown): Error {
  if (isCofferError(error)) return new Error(`${error.code} (HTTP ${error.status}): ${error.message}`);
  return error instanceof Error ? error : new Error(String(error));
}

const api: PageApi = {
  async upload(request) {
    let refreshes = 0;
    const client = createClient({
      baseUrl: request.baseUrl,
      token: request.token,
      refreshToken: async () => {
        refreshes += 1;
        const response = await fetch(request.refreshPath ?? '/no-refresh', { method: 'POST' });
        if (!response.ok) throw new Error(`token refresh answered ${response.status}`);
        return ((await response.json()) as { token: string }).token;
      },
    });
    const file = new File([seededBytes(request.seed, request.size)], request.name, {
      type: 'application/octet-stream',
      lastModified: Date.UTC(2024, 0, 1),
    });
    const progress: Progress[] = [];
    try {
      const uploaded = await client.upload(request.projectId, file, {
        partSize: request.partSize,
        concurrency: request.concurrency,
        resume: request.resume,
        onProgress: ({ loaded, total }) => progress.push({ loaded, total }),
      });
      return { file: uploaded, progress, refreshes };
    } catch (error) {
      throw described(error);
    }
  },

  resumeEntries: () => storedEntries(RESUME_PREFIX),

  async download(url) {
    const response = await fetch(url);
    const bytes = await response.arrayBuffer();
    return {
      status: response.status,
      size: bytes.byteLength,
      sha256: hex(await crypto.subtle.digest('SHA-256', bytes)),
    };
  },
};

(globalThis as { cofferPage?: PageApi }).cofferPage = api;
