/**
 * What the Uppy test page offers the test (a file of its own: the page's program has the DOM's
 * types and Uppy's, which the test's Node.js program must not take in).
 */
import type { components } from '@coffer/client';

export interface UppyUploadRequest {
  /**
   * `credentials`: Uppy signs each request itself with temporary credentials the page mints from
   * its upload token; `signed`: the page's server signs each request (`/sign`).
   */
  mode: 'credentials' | 'signed';
  /** Coffer's REST API, the project and the upload token (credentials mode). */
  baseUrl: string;
  projectId: string;
  token?: string;
  /** The object key under the credentials' prefix (credentials mode) or in the bucket (signed mode). */
  key: string;
  /** Sent as x-amz-meta-* headers, which the server signs (signed mode). */
  metadata?: Record<string, string>;
  /** The File: `size` bytes made from `seed`, the same after a reload (and so is its lastModified). */
  seed: number;
  size: number;
  name: string;
  type: string;
  multipart: boolean;
  partSize?: number;
  /** Keep the multipart upload in localStorage, and take it up again if one is there. */
  resume?: boolean;
  /** Credentials Uppy gets first (credentials mode), before the page mints its own. */
  firstCredentials?: TemporaryCredentials;
}

/** Coffer's answer to POST /v1/projects/{id}/s3-credentials/temporary. */
export type TemporaryCredentials = components['schemas']['TemporaryS3Credentials'];

export interface UppyUploadResult {
  key: string;
  location: string;
  /** bytesUploaded of each upload-progress event. */
  progress: number[];
  /** How often Uppy asked for credentials (credentials mode). */
  credentialRequests: number;
}

/** What the page's server is asked to sign: Uppy's request, with what the page knows of the file. */
export interface SignRequestBody {
  request: { method: string; key: string; uploadId?: string; partNumber?: number };
  contentType: string;
  metadata: Record<string, string>;
}

export interface UppyPageApi {
  upload(request: UppyUploadRequest): Promise<UppyUploadResult>;
  /** The multipart uploads the page keeps in localStorage. */
  resumeEntries(): Record<string, unknown>;
}
