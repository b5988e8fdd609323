import type { FastifyCorsOptions } from '@fastify/cors';
import type { FastifyRequest } from 'fastify';
import { underMount } from './protocol.ts';

/**
 * What a browser's tus client sends and reads, beside the API's own headers: tusd's default list, less
 * Origin (a browser sets it, never asks for it) and the IETF draft's headers (Upload-Complete,
 * Upload-Draft-Interop-Version…), a protocol not served here.
 */
const ALLOWED = [
  'Tus-Resumable',
  'Upload-Length',
  'Upload-Offset',
  'Upload-Metadata',
  'Upload-Defer-Length',
  'Upload-Concat',
  'X-HTTP-Method-Override',
  'X-Requested-With',
  'X-Request-ID',
  'Content-Type',
];
const EXPOSED = [
  'Location',
  'Upload-Offset',
  'Upload-Length',
  'Upload-Expires',
  'Upload-Metadata',
  'Upload-Defer-Length',
  'Tus-Resumable',
  'Tus-Version',
  'Tus-Extension',
  'Tus-Max-Size',
  'x-coffer-file-id',
];

const isPreflight = (request: FastifyRequest) =>
  request.headers['access-control-request-method'] !== undefined;

/**
 * The tus endpoint's CORS options for a request under its mount (undefined elsewhere): `rest`'s with
 * the tus headers added, where an OPTIONS that is not a preflight goes on to the endpoint (tus's own
 * OPTIONS says what the server supports).
 */
export function tusCorsFor(
  rest: FastifyCorsOptions & { allowedHeaders: string[]; exposedHeaders: string[] },
): (request: FastifyRequest) => FastifyCorsOptions | undefined {
  const tus: FastifyCorsOptions = {
    ...rest,
    // Header names are case-insensitive: the API's X-Request-Id is tus-js-client's X-Request-ID.
    allowedHeaders: [
      ...rest.allowedHeaders,
      ...ALLOWED.filter(
        (name) => !rest.allowedHeaders.some((own) => own.toLowerCase() === name.toLowerCase()),
      ),
    ],
    exposedHeaders: [...rest.exposedHeaders, ...EXPOSED],
  };
  const tusOptions: FastifyCorsOptions = { ...tus, preflightContinue: true };
  return (request) => (!underMount(request.url) ? undefined : isPreflight(request) ? tus : tusOptions);
}
