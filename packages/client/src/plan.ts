/**
 * What an upload is, whichever way it goes: its options, the plan taken from the input, and the part
 * size and concurrency of multipart.
 */
import type { Api } from './api.js';
import { invalidInput } from './errors.js';
import { DEFAULT_CONTENT_TYPE, typeOfName } from './mime.js';
import type { ProgressListener } from './progress.js';
import type { ResumeStore } from './resume.js';
import type { UploadSource } from './source.js';
import type { PutTransport } from './transport.js';

const MIB = 1024 * 1024;
export const MIN_PART_SIZE = 5 * MIB;
export const DEFAULT_PART_SIZE = 8 * MIB;
export const DEFAULT_MULTIPART_THRESHOLD = 16 * MIB;
export const DEFAULT_CONCURRENCY = 4;
export const MAX_PARTS = 10_000;

export interface UploadOptions {
  /** Default: the File's name or the path's base name, else "upload". */
  filename?: string;
  /** Default: the Blob's type, else the file name's extension, else application/octet-stream. */
  contentType?: string;
  /** Bytes; required for streams, checked against Blobs and bytes. */
  size?: number;
  folderId?: string | null;
  metadata?: Record<string, unknown>;
  tags?: string[];
  /** Bytes per multipart part, at least 5 MiB (default 8 MiB); raised when a file would need over 10000 parts. */
  partSize?: number;
  /** Parts in flight at once (default 4). */
  concurrency?: number;
  /** Files larger than this go multipart (default 16 MiB). */
  multipartThreshold?: number;
  onProgress?: ProgressListener;
  /** Aborts the upload; its multipart session is ended on the server unless `resume` is on. */
  signal?: AbortSignal;
  /** Keeps the multipart session of an interrupted upload, and continues it on the next upload of the same file. */
  resume?: boolean;
  /** Where resumable sessions are remembered (default: localStorage in browsers, a JSON file in Node.js). */
  resumeStore?: ResumeStore;
}

export interface UploadContext {
  api: Api;
  put: PutTransport;
  resumeStore(): ResumeStore;
}

/** An upload with everything decided. */
export interface UploadPlan {
  projectId: string;
  source: UploadSource;
  filename: string;
  contentType: string;
  size: number;
  options: UploadOptions;
}

function positiveInteger(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw invalidInput(`${name} must be a positive integer`);
  return value;
}

export function planUpload(projectId: string, source: UploadSource, options: UploadOptions): UploadPlan {
  if (options.size !== undefined && options.size !== source.size) {
    throw invalidInput(`size is ${options.size} but the input holds ${source.size} bytes`);
  }
  const filename = options.filename ?? source.name ?? 'upload';
  const contentType = options.contentType ?? source.type ?? typeOfName(filename) ?? DEFAULT_CONTENT_TYPE;
  return { projectId, source, filename, contentType, size: source.size, options };
}

/** The part size of a new multipart upload: the option, raised so that the file fits in 10000 parts. */
export function partSizeFor(size: number, options: UploadOptions): number {
  const wanted = positiveInteger(options.partSize, DEFAULT_PART_SIZE, 'partSize');
  if (wanted < MIN_PART_SIZE) throw invalidInput(`partSize must be at least ${MIN_PART_SIZE} bytes (5 MiB)`);
  return Math.max(wanted, Math.ceil(size / MAX_PARTS / MIB) * MIB);
}

export const concurrencyOf = (options: UploadOptions) =>
  positiveInteger(options.concurrency, DEFAULT_CONCURRENCY, 'concurrency');
