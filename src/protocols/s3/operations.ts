import type { Services } from '../../services.ts';
import { bucketOperations } from './bucket-operations.ts';
import type { Operation } from './call.ts';
import { multipartOperations } from './multipart-operations.ts';
import { objectOperations } from './object-operations.ts';
import { taggingOperations } from './tagging.ts';

/**
 * Every operation the endpoint serves, by `METHOD target[?subresource]` (see operationOf in
 * routes.ts); any other answers 501 NotImplemented.
 */
export function s3Operations(services: Services, region: string): Record<string, Operation> {
  return {
    ...bucketOperations(services, region),
    ...objectOperations(services),
    ...taggingOperations(services),
    ...multipartOperations(services),
  };
}

/** The S3 name of an operation, for metrics: its API reference's (CopyObject, UploadPartCopy and ListObjectsV2 told apart). */
export function operationName(
  operation: string,
  request: { headers: Record<string, unknown> },
  query: URLSearchParams,
) {
  const copies = request.headers['x-amz-copy-source'] !== undefined;
  if (operation === 'PUT object' && copies) return 'CopyObject';
  if (operation === 'PUT object?partNumber' && copies) return 'UploadPartCopy';
  if (operation === 'GET bucket' && query.get('list-type') === '2') return 'ListObjectsV2';
  return NAMES[operation] ?? 'unsupported';
}

const NAMES: Record<string, string> = {
  'GET service': 'ListBuckets',
  'HEAD bucket': 'HeadBucket',
  'GET bucket?location': 'GetBucketLocation',
  'GET bucket?versioning': 'GetBucketVersioning',
  'PUT bucket': 'CreateBucket',
  'GET bucket': 'ListObjects',
  'GET bucket?versions': 'ListObjectVersions',
  'GET bucket?uploads': 'ListMultipartUploads',
  'POST bucket?delete': 'DeleteObjects',
  'GET object': 'GetObject',
  'HEAD object': 'HeadObject',
  'PUT object': 'PutObject',
  'GET object?tagging': 'GetObjectTagging',
  'PUT object?tagging': 'PutObjectTagging',
  'DELETE object?tagging': 'DeleteObjectTagging',
  'DELETE object': 'DeleteObject',
  'POST object?uploads': 'CreateMultipartUpload',
  'PUT object?partNumber': 'UploadPart',
  'POST object?uploadId': 'CompleteMultipartUpload',
  'DELETE object?uploadId': 'AbortMultipartUpload',
  'GET object?uploadId': 'ListParts',
};
