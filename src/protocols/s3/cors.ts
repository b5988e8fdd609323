import type { FastifyCorsOptions } from '@fastify/cors';
import type { FastifyRequest } from 'fastify';
import { isS3Url } from './routes.ts';

/**
 * What browsers may do with the S3 endpoint: S3 clients sign and send headers of their own
 * (x-amz-date, x-amz-content-sha256, x-amz-security-token, x-amz-checksum-*, x-amz-meta-*,
 * Content-MD5…), so a preflight gets back the headers it asks for, as S3 does for an allowed origin
 * whose rule allows `*` (the signature, not CORS, decides what a request may do). Browsers then
 * read the headers S3 clients need: the ETag of each part above all, and the checksums an SDK
 * validates a download against.
 */
const S3_CORS = {
  methods: ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'],
  exposedHeaders: [
    'ETag',
    'x-amz-version-id',
    'x-amz-delete-marker',
    'x-amz-mp-parts-count',
    'x-amz-tagging-count',
    'x-amz-request-id',
    'x-amz-id-2',
    'x-amz-checksum-crc32',
    'x-amz-checksum-crc32c',
    'x-amz-checksum-crc64nvme',
    'x-amz-checksum-sha1',
    'x-amz-checksum-sha256',
    'x-amz-checksum-type',
    'x-coffer-file-id',
    'Content-Length',
    'Content-Range',
    'Content-Disposition',
    'Last-Modified',
    'Retry-After',
  ],
} satisfies FastifyCorsOptions;

/**
 * The S3 endpoint's CORS options for a request under its mount (undefined elsewhere): `rest`'s
 * origins, every requested header allowed, S3's headers exposed.
 */
export function s3CorsFor(
  rest: FastifyCorsOptions,
): (request: FastifyRequest) => FastifyCorsOptions | undefined {
  // Without allowedHeaders, @fastify/cors answers a preflight with the headers it requested.
  const { allowedHeaders: _fixed, ...shared } = rest;
  const s3: FastifyCorsOptions = { ...shared, ...S3_CORS };
  return (request) => (isS3Url(request.url) ? s3 : undefined);
}
