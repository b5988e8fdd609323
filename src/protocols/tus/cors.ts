import type { FastifyCorsOptions } from '@fastify/cors';
import type { FastifyRequest } from 'fastify';
import { MOUNT } from './protocol.ts';

/** What a browser's tus client sends and reads, beside the API's own headers. */
const ALLOWED = [
  'Tus-Resumable',
  'Upload-Length',
  'Upload-Offset',
  'Upload-Metadata',
  'Upload-Defer-Length',
  'Upload-Concat',
  'X-HTTP-Method-Override',
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

const isTus = (request: FastifyRequest) => request.url === MOUNT || request.url.startsWith(`${MOUNT}/`);
const isPreflight = (request: FastifyRequest) =>
  request.headers['access-control-request-method'] !== undefined;

/**
 * The API's CORS options with the tus endpoint's headers added for its paths, where an OPTIONS that is
 * not a preflight goes on to the endpoint (tus's own OPTIONS says what the server supports).
 */
export function withTusCors(
  options: FastifyCorsOptions & { allowedHeaders: string[]; exposedHeaders: string[] },
): FastifyCorsOptions {
  const tus: FastifyCorsOptions = {
    ...options,
    allowedHeaders: [
      ...options.allowedHeaders,
      ...ALLOWED.filter((name) => !options.allowedHeaders.includes(name)),
    ],
    exposedHeaders: [...options.exposedHeaders, ...EXPOSED],
  };
  const tusOptions: FastifyCorsOptions = { ...tus, preflightContinue: true };
  return {
    delegator: (request: FastifyRequest, done: (error: Error | null, options?: FastifyCorsOptions) => void) =>
      done(null, !isTus(request) ? options : isPreflight(request) ? tus : tusOptions),
  };
}
