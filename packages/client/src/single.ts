/** The two-step upload: initiate, PUT the whole body to its URL, confirm. */
import type { UploadContext, UploadOptions, UploadPlan } from './plan.js';
import { progressTracker } from './progress.js';
import { isSuccess, putError, putWithRetries } from './put.js';
import type { RetryPolicy } from './retry.js';
import type { PutBody, PutTransport } from './transport.js';
import type { FileObject, InitiateUploadRequest } from './types.js';

export interface WholeBody {
  url: string;
  body: PutBody;
  contentType: string;
  size: number;
  options: Pick<UploadOptions, 'signal' | 'onProgress'>;
}

/** PUTs a whole object to its presigned URL, with retries and progress from 0 to size. */
export async function putWhole(put: PutTransport, retry: RetryPolicy, whole: WholeBody): Promise<void> {
  const progress = progressTracker(whole.size, whole.options.onProgress);
  progress.start(0);
  const answer = await putWithRetries(put, retry, {
    url: whole.url,
    body: whole.body,
    contentType: whole.contentType,
    size: whole.size,
    signal: whole.options.signal,
    // Without a listener the body goes whole: nothing to count.
    onProgress: whole.options.onProgress && progress.part(1),
  });
  if (!isSuccess(answer)) throw putError(answer);
  progress.done();
}

/** The body fields that an initiate and a multipart start share. */
export function placement({ folderId, metadata, tags }: UploadOptions) {
  const fields: Pick<InitiateUploadRequest, 'folder_id' | 'metadata' | 'tags'> = {};
  if (folderId !== undefined) fields.folder_id = folderId;
  if (metadata !== undefined) fields.metadata = metadata;
  if (tags !== undefined) fields.tags = tags;
  return fields;
}

export async function singleUpload({ api, put }: UploadContext, plan: UploadPlan): Promise<FileObject> {
  const { projectId, source, size, contentType, options } = plan;
  // Read (and check the length of a stream) before anything is created on the server.
  const body = await source.read(0, size);
  await source.finish();
  const { signal } = options;
  const started = await api.call('post', '/v1/projects/{project_id}/files/upload', {
    params: { project_id: projectId },
    body: { filename: plan.filename, content_type: contentType, size_bytes: size, ...placement(options) },
    signal,
  });
  await putWhole(put, api.retry, { url: started.upload_url, body, contentType, size, options });
  return api.call('post', '/v1/projects/{project_id}/files/{file_id}/confirm', {
    params: { project_id: projectId, file_id: started.file_id },
    signal,
  });
}
