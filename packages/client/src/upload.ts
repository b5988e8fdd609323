/** `client.upload`: the choice of single or multipart for a planned upload. */
import { abortedError } from './errors.js';
import { multipartUpload } from './multipart.js';
import { DEFAULT_MULTIPART_THRESHOLD, type UploadContext, type UploadPlan } from './plan.js';
import { singleUpload } from './single.js';
import type { FileObject } from './types.js';

export async function upload(context: UploadContext, plan: UploadPlan): Promise<FileObject> {
  const { options, size } = plan;
  if (options.signal?.aborted) throw abortedError(options.signal);
  const threshold = options.multipartThreshold ?? DEFAULT_MULTIPART_THRESHOLD;
  return size > threshold ? multipartUpload(context, plan) : singleUpload(context, plan);
}
