/**
 * Multipart uploads: start (or resume), PUT the missing parts in parallel keeping each ETag,
 * complete with the parts ascending.
 */
import type { Api } from './api.js';
import { abortedError, CofferError, isCofferError } from './errors.js';
import { concurrencyOf, partSizeFor, type UploadContext, type UploadPlan } from './plan.js';
import { runPool } from './pool.js';
import { progressTracker } from './progress.js';
import { isSuccess, putError, putWithRetries } from './put.js';
import { type ResumeStore, readEntry, resumeKey } from './resume.js';
import { placement } from './single.js';
import type { FileObject } from './types.js';

const SESSION = '/v1/projects/{project_id}/files/upload/multipart/{upload_id}';
/** Parts carry no signed type: one neutral type for all. */
const PART_TYPE = 'application/octet-stream';

interface Session {
  uploadId: string;
  fileId: string;
  partSize: number;
  /** ETags of the parts already stored, by part number. */
  etags: Map<number, string>;
  storedBytes: number;
}

/** Bytes of part `n` (1-based) of a file of `size` cut in `partSize` parts. */
const partLength = (n: number, partSize: number, size: number) =>
  Math.max(0, Math.min(partSize, size - (n - 1) * partSize));
const partCount = (size: number, partSize: number) => Math.max(1, Math.ceil(size / partSize));

type Resumed = { session: Session } | { file: FileObject } | undefined;

/** The session a previous run left, with its stored parts; undefined when it cannot be continued. */
async function resumeSession(api: Api, plan: UploadPlan, store: ResumeStore, key: string): Promise<Resumed> {
  const entry = await readEntry(store, key);
  if (!entry) return undefined;
  const params = { project_id: plan.projectId, upload_id: entry.uploadId };
  const state = await api.call('get', SESSION, { params, signal: plan.options.signal }).catch((error) => {
    // Gone, or not this caller's: start again.
    if (isCofferError(error) && (error.status === 404 || error.status === 409)) return undefined;
    throw error;
  });
  if (state?.status === 'completed') {
    await store.delete(key);
    const file = await api.call('get', '/v1/projects/{project_id}/files/{file_id}', {
      params: { project_id: plan.projectId, file_id: state.file_id },
      signal: plan.options.signal,
    });
    return { file };
  }
  if (state?.status !== 'open' || state.total_size_bytes !== plan.size) {
    await store.delete(key);
    return undefined;
  }
  const etags = new Map<number, string>();
  let storedBytes = 0;
  const count = partCount(plan.size, entry.partSize);
  for (const part of state.parts) {
    // A part of another length (cut by another part size, or cut short) is sent again.
    const length = partLength(part.part_number, entry.partSize, plan.size);
    if (part.part_number > count || part.size_bytes !== length) continue;
    etags.set(part.part_number, part.etag);
    storedBytes += length;
  }
  return {
    session: { uploadId: entry.uploadId, fileId: entry.fileId, partSize: entry.partSize, etags, storedBytes },
  };
}

async function startSession(api: Api, plan: UploadPlan): Promise<Session> {
  const partSize = partSizeFor(plan.size, plan.options);
  const started = await api.call('post', '/v1/projects/{project_id}/files/upload/multipart/start', {
    params: { project_id: plan.projectId },
    body: {
      filename: plan.filename,
      content_type: plan.contentType,
      total_size_bytes: plan.size,
      ...placement(plan.options),
    },
    signal: plan.options.signal,
  });
  return { uploadId: started.upload_id, fileId: started.file_id, partSize, etags: new Map(), storedBytes: 0 };
}

/** PUTs one part: retries transient failures, and asks for a fresh URL once when the URL is refused (expired). */
async function sendPart(
  { api, put }: UploadContext,
  plan: UploadPlan,
  session: Session,
  partNumber: number,
  signal: AbortSignal,
  onProgress: ((loaded: number) => void) | undefined,
): Promise<string> {
  const start = (partNumber - 1) * session.partSize;
  const size = partLength(partNumber, session.partSize, plan.size);
  const body = await plan.source.read(start, start + size);
  const partUrl = async () =>
    (
      await api.call('get', `${SESSION}/part-url`, {
        params: { project_id: plan.projectId, upload_id: session.uploadId },
        query: { part: partNumber, size },
        signal,
      })
    ).url;
  let url = await partUrl();
  for (let renewed = false; ; renewed = true) {
    const answer = await putWithRetries(put, api.retry, {
      url,
      body,
      contentType: PART_TYPE,
      size,
      signal,
      onProgress,
    });
    if (isSuccess(answer)) {
      if (answer.etag) return answer.etag;
      throw new CofferError({
        status: answer.status,
        code: 'MISSING_ETAG',
        message:
          'The part was stored but its ETag header cannot be read: the bucket CORS rule must expose ETag',
      });
    }
    if (answer.status !== 403 || renewed) throw putError(answer);
    url = await partUrl();
  }
}

export async function multipartUpload(context: UploadContext, plan: UploadPlan): Promise<FileObject> {
  const { api } = context;
  const { options, projectId } = plan;
  const store = options.resume ? (options.resumeStore ?? context.resumeStore()) : undefined;
  const key = resumeKey({ ...plan, lastModified: plan.source.lastModified });
  const resumed = store ? await resumeSession(api, plan, store, key) : undefined;
  if (resumed && 'file' in resumed) return resumed.file;
  const session = resumed?.session ?? (await startSession(api, plan));
  if (store && !resumed) {
    await store.set(key, {
      uploadId: session.uploadId,
      fileId: session.fileId,
      partSize: session.partSize,
      createdAt: new Date().toISOString(),
    });
  }
  // One signal for the parts: the caller's abort, or the first part that fails stops the others.
  const controller = new AbortController();
  const forward = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', forward, { once: true });
  if (options.signal?.aborted) forward();
  const params = { project_id: projectId, upload_id: session.uploadId };
  try {
    const progress = progressTracker(plan.size, options.onProgress);
    progress.start(session.storedBytes);
    const count = partCount(plan.size, session.partSize);
    const missing = Array.from({ length: count }, (_, index) => index + 1).filter(
      (n) => !session.etags.has(n),
    );
    await runPool(
      missing,
      concurrencyOf(options),
      async (n) => {
        const onProgress = options.onProgress && progress.part(n);
        session.etags.set(n, await sendPart(context, plan, session, n, controller.signal, onProgress));
      },
      () => controller.abort(),
    );
    await plan.source.finish();
    progress.done();
    const parts = [...session.etags]
      .sort(([a], [b]) => a - b)
      .map(([part_number, etag]) => ({ part_number, etag }));
    const file = await api.call('post', `${SESSION}/complete`, {
      params,
      body: { parts },
      signal: options.signal,
    });
    await store?.delete(key);
    return file;
  } catch (error) {
    const failure = options.signal?.aborted ? abortedError(options.signal) : error;
    // A resumable session is kept for the next run; any other is ended, best effort.
    if (!store) await api.call('delete', SESSION, { params }).catch(() => {});
    throw failure;
  } finally {
    options.signal?.removeEventListener('abort', forward);
  }
}
