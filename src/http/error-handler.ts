import { randomUUID } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  badRequest,
  bodyTooLarge,
  concurrentChange,
  DomainError,
  databaseUnavailable,
  type ErrorCode,
  internalError,
  invalidJson,
  noRoute,
  notJson,
  removedMeanwhile,
  unreadableValue,
  uploadInterrupted,
  validationError,
} from '../domain/errors.ts';
import { DatabaseUnavailableError } from '../infra/db.ts';
import { ImageError } from '../infra/images/errors.ts';
import { StoreError } from '../infra/storage/object-store.ts';
import { fromHttpStatus, HttpError, httpStatus } from './errors.ts';
import { fromImageError } from './image-errors.ts';
import { fromStoreError } from './store-errors.ts';

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

// Keywords that say the request could not be read as the documented shape (400); any other
// keyword means a well-formed value broke a rule (422), as the contract's clarifications say.
const SHAPE_KEYWORDS = new Set(['type', 'required', 'additionalProperties', 'anyOf', 'oneOf']);
// In a query string or path, only these say a readable value broke a rule (422); a value that is
// not of its type or not one of the known words could not be read (400).
const RULE_KEYWORDS = new Set([
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'uniqueItems',
]);
// PostgreSQL's data exceptions for a value it cannot take (a NUL in text, a number out of range):
// input that slipped past the checks, still the caller's to fix.
const UNREADABLE_VALUE_CODES = new Set(['22P05', '22021', '22P02', '22003']);
// A reference to a row that a concurrent request removed after it was checked (e.g. a folder).
const FOREIGN_KEY_VIOLATION = '23503';
// A transaction PostgreSQL chose to abort for crossing another one (a deadlock, a serialization
// failure): nothing was changed, and the same request may well succeed when sent again.
const RETRYABLE_CODES = new Set(['40P01', '40001']);

function fieldOf(error: AjvError, context: string | undefined): string {
  const path = error.instancePath
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const extra = error.params.missingProperty ?? error.params.additionalProperty;
  if (typeof extra === 'string') path.push(extra);
  const field = path.join('.');
  return context === 'body' || !field ? field || context || 'body' : field;
}

function fromValidation(error: FastifyError): DomainError {
  const errors = (error.validation ?? []) as unknown as AjvError[];
  const first = errors[0];
  const context = error.validationContext;
  const field = first ? fieldOf(first, context) : (context ?? 'body');
  let reason = first?.message ?? 'is invalid';
  if (first?.keyword === 'additionalProperties') reason = 'is not a known field';
  if (first?.keyword === 'enum')
    reason = `must be one of: ${(first.params.allowedValues as unknown[]).join(', ')}`;
  const message = `${field} ${reason}`;
  const details = { field, location: context, reason };
  // In a body, enum and range violations are rule breaks (422), type mismatches are 400; in a query
  // string or path, where an unknown word is unreadable too, only ranges and lengths are rule breaks.
  const isShape =
    !first || (context === 'body' ? SHAPE_KEYWORDS.has(first.keyword) : !RULE_KEYWORDS.has(first.keyword));
  return isShape ? badRequest(message, details) : validationError(message, details);
}

/** Turns anything thrown into a DomainError; unknown failures become a 500 that reveals nothing. */
export function toDomainError(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  if (error instanceof StoreError) return fromStoreError(error);
  if (error instanceof ImageError) return fromImageError(error);
  if (error instanceof DatabaseUnavailableError) return databaseUnavailable();
  const fastifyError = error as FastifyError;
  if (fastifyError?.validation) return fromValidation(fastifyError);
  switch (fastifyError?.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return bodyTooLarge();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return notJson();
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalidJson();
  }
  if (fastifyError?.code === FOREIGN_KEY_VIOLATION) return removedMeanwhile();
  if (RETRYABLE_CODES.has(fastifyError?.code)) return concurrentChange();
  if (UNREADABLE_VALUE_CODES.has(fastifyError?.code)) return unreadableValue();
  const status = fastifyError?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return fromHttpStatus(status, fastifyError.message);
  }
  return internalError();
}

/** How the REST API answers an error: its status, headers and the contract's error body. */
export interface HttpAnswer {
  status: number;
  code: DomainError['code'];
  message: string;
  details: Record<string, unknown> | undefined;
  headers: Record<string, string> | undefined;
}

/** The REST API's answer to anything thrown. */
export function httpAnswer(error: unknown): HttpAnswer {
  const domainError = toDomainError(error);
  return {
    status: httpStatus(domainError),
    code: domainError.code,
    message: domainError.message,
    details: domainError.details,
    headers: domainError instanceof HttpError ? domainError.headers : undefined,
  };
}

export function sendError(request: FastifyRequest, reply: FastifyReply, answer: HttpAnswer): FastifyReply {
  if (answer.headers) reply.headers(answer.headers);
  return reply
    .code(answer.status)
    .type('application/json; charset=utf-8')
    .send({
      error: {
        code: answer.code,
        message: answer.message,
        ...(answer.details ? { details: answer.details } : {}),
        request_id: request.id,
      },
    });
}

/**
 * The error a handler threw, or the client's failure when it is its request body's own (Node's
 * `aborted`: the connection closed before the body's end). Only that one: an outbound connection
 * cut the same way (the S3 backend's) is the server's failure, and a refusal Coffer ended the body
 * with stays what it says.
 */
export const cutByClient = (request: FastifyRequest, error: unknown): unknown =>
  error != null && error === request.raw.errored && !(error instanceof DomainError)
    ? uploadInterrupted()
    : error;

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const answer = httpAnswer(cutByClient(request, error));
    // The error as thrown, with its causes (e.g. why the object store is unavailable): never in the answer.
    if (answer.status >= 500) request.log.error({ err: error }, 'request failed');
    return sendError(request, reply, answer);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, httpAnswer(noRoute(request.method, request.url.split('?')[0]!))),
  );
}

/** The longest path parameter the router takes (Fastify's maxParamLength): ids are far shorter. */
export const MAX_PARAM_LENGTH = 100;

/**
 * Fastify's refusals of a URL before any route runs (bad percent-encoding, a path parameter past
 * its length), answered in the contract's error body like every other error.
 */
export function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const refusal =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? badRequest(`A path segment is longer than ${MAX_PARAM_LENGTH} characters`, {
          location: 'params',
          max_length: MAX_PARAM_LENGTH,
        })
      : badRequest('The path is not valid: a percent sign must start an escape like %2F', {
          location: 'params',
        });
  return sendError(request, reply, httpAnswer(refusal));
}

/**
 * What Node's HTTP parser refuses before Fastify sees a request (headers or a query string past the
 * size limit, malformed HTTP, a request too slow to arrive): the contract's error body on the raw
 * socket, with a request id of its own, then the connection closed.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message]: [number, ErrorCode, string] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [
          431,
          'HEADERS_TOO_LARGE',
          `The request line and headers are larger than the server takes (${maxHeaderSize / 1024} KiB)`,
        ]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'BAD_REQUEST', 'The request did not arrive in time']
        : [400, 'BAD_REQUEST', 'The request is not valid HTTP'];
  closeWith(socket, jsonAnswer(status, code, message, `req_${randomUUID()}`));
}

/** An answer written straight onto a socket, outside Fastify (its connection closed after it). */
export interface RawAnswer {
  status: number;
  type: string;
  body: string;
  headers?: Record<string, string>;
}

/** The contract's error body as a raw answer. */
export const jsonAnswer = (
  status: number,
  code: ErrorCode,
  message: string,
  requestId: string,
): RawAnswer => ({
  status,
  type: 'application/json; charset=utf-8',
  body: JSON.stringify({ error: { code, message, request_id: requestId } }),
  headers: { 'x-request-id': requestId },
});

/** Closes the connection of `socket`, with `answer` written first when there is one and it still can. */
export function closeWith(socket: Socket, answer: RawAnswer | undefined): void {
  if (answer && socket.writable) {
    const { status, type, body, headers = {} } = answer;
    const named = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${type}\r\n${named.join('')}` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
