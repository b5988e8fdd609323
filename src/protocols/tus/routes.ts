import { type IncomingMessage, METHODS } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, forbidden, insufficientScope } from '../../domain/errors.ts';
import type { Caller } from '../../domain/principal.ts';
import { authenticate } from '../../http/auth.ts';
import { MAX_OBJECT_BYTES } from '../../modules/projects/schemas.ts';
import type { Services } from '../../services.ts';
import type { Body } from './append.ts';
import {
  headerNumber,
  MOUNT,
  notOffsetStream,
  OFFSET_STREAM,
  TUS_EXTENSIONS,
  TUS_VERSION,
  underMount,
  unsupportedVersion,
  uploadLengthOf,
} from './protocol.ts';
import type { UploadState } from './state.ts';
import { createTusUploads } from './uploads.ts';

const header = (request: FastifyRequest, name: string) => {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** The caller of an authenticated tus request: an API key with files:upload, or an upload token. */
function callerOf(request: FastifyRequest): Caller {
  const { principal } = request;
  if (principal.kind === 'admin' || !request.project) {
    throw forbidden('tus uploads are made with an API key or an upload token of a project');
  }
  if (!principal.scopes.includes('files:upload')) throw insufficientScope('files:upload');
  return { principal, project: request.project };
}

/**
 * The request's bytes, when it has any: of Content-Type application/offset+octet-stream, with the
 * length Content-Length gives, or none when it is chunked (tus-java-client's, with Expect: 100-continue).
 */
function bodyOf(request: FastifyRequest, required: boolean): Body | undefined {
  const size = headerNumber(request.headers['content-length'], 'Content-Length');
  const type = header(request, 'content-type');
  if (!required && (size ?? 0) === 0 && request.headers['transfer-encoding'] === undefined) return undefined;
  if (type?.split(';')[0]?.trim().toLowerCase() !== OFFSET_STREAM) throw notOffsetStream();
  const { raw } = request;
  const { socket } = raw;
  return {
    stream: request.body as Readable,
    size,
    received: () => socket.bytesRead,
    arrived: () => raw.complete,
  };
}

/**
 * Names the protocol's version on an answer under the mount. Every answer there carries it: the
 * routes' own, and those given outside the endpoint's plugin (the router's 404, a URL it refuses, a
 * CORS preflight), hence called by the whole server (its first onRequest hook, and where Fastify
 * answers before any hook runs).
 */
export function tusResumable(request: FastifyRequest, reply: FastifyReply): void {
  if (underMount(request.url)) reply.header('tus-resumable', TUS_VERSION);
}

/** Requests under the mount whose X-HTTP-Method-Override names no HTTP method, with that value. */
const unnamedOverrides = new WeakMap<IncomingMessage, string>();

/**
 * X-HTTP-Method-Override of a request under the mount (for clients behind proxies that pass only GET
 * and POST), whatever its own method: tus 1.0.0 has it interpreted as the request's method. The
 * request becomes the method it names before the router sees it, as tusd does, on every path of the
 * endpoint. It then meets that method's route with that route's checks (OPTIONS needs neither
 * credential nor version), or the router's 404 where the endpoint has no such route. A CORS
 * preflight stays one (a browser never sends the header with it). A value that names no HTTP method
 * leaves the request, noted for the endpoint to refuse.
 */
export function overrideTusMethod(raw: IncomingMessage): void {
  if (!underMount(raw.url ?? '')) return;
  const value = raw.headers['x-http-method-override']?.toString();
  if (value === undefined) return;
  if (raw.method === 'OPTIONS' && raw.headers['access-control-request-method'] !== undefined) return;
  const method = value.trim().toUpperCase();
  if (METHODS.includes(method)) raw.method = method;
  else unnamedOverrides.set(raw, value);
}

/**
 * The tus 1.0.0 endpoint at /tus: creation (with upload, with deferred length), termination and
 * expiration, on the upload core. Errors carry Coffer's error body where tus leaves the body free.
 */
export function tusRoutes(services: Services) {
  const uploads = createTusUploads(services);
  const { config } = services;

  /** The most an upload of this request's caller may hold; the server's when it names none. */
  async function maxSize(request: FastifyRequest): Promise<number> {
    if (!request.headers.authorization) return MAX_OBJECT_BYTES;
    try {
      const { principal, project } = await authenticate(request, services.credentials);
      if (principal.kind === 'admin') return MAX_OBJECT_BYTES;
      const own = project ?? (await services.projects.getProject(principal.projectId));
      return own ? await services.ingest.sizeLimit({ principal, project: own }) : MAX_OBJECT_BYTES;
    } catch {
      return MAX_OBJECT_BYTES;
    }
  }

  function answer(reply: FastifyReply, state: UploadState): void {
    reply.header('upload-offset', String(state.offset));
    if (state.expiresAt) reply.header('upload-expires', state.expiresAt.toUTCString());
  }

  return async function plugin(app: FastifyInstance): Promise<void> {
    // Bodies stay streams: a PATCH's bytes go to the store as they arrive.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // An X-HTTP-Method-Override that names no method is refused rather than taken for the request's own.
    app.addHook('preHandler', async (request) => {
      const override = unnamedOverrides.get(request.raw);
      if (override !== undefined) {
        throw badRequest(`X-HTTP-Method-Override names no HTTP method: ${override}`, {
          field: 'X-HTTP-Method-Override',
        });
      }
    });
    // Not in the OpenAPI document: tus is its own protocol (tus.io), documented in the README.
    const common = { schema: { hide: true } };
    // Every request but OPTIONS names the protocol's version; another is refused before its credential.
    const requireVersion = (request: FastifyRequest) => {
      if (header(request, 'tus-resumable') !== TUS_VERSION) throw unsupportedVersion();
    };
    const authenticated = {
      ...common,
      config: { access: 'authenticated' as const, uploadToken: true, precondition: requireVersion },
    };

    const options = async (request: FastifyRequest, reply: FastifyReply) =>
      reply
        .code(204)
        .headers({
          'tus-version': TUS_VERSION,
          'tus-extension': TUS_EXTENSIONS,
          'tus-max-size': String(await maxSize(request)),
        })
        .send();
    app.options(MOUNT, { ...common, config: { access: 'public' } }, options);
    app.options(`${MOUNT}/:id`, { ...common, config: { access: 'public' } }, options);

    app.post(MOUNT, authenticated, async (request, reply) => {
      const caller = callerOf(request);
      // Not served (TUS_EXTENSIONS): taken for a plain upload, each partial upload would become a file.
      if (header(request, 'upload-concat') !== undefined) {
        throw badRequest(
          'Upload-Concat: concatenation is not served; send the file as one upload (tus-js-client: no parallelUploads)',
          { field: 'Upload-Concat' },
        );
      }
      const deferred = header(request, 'upload-defer-length');
      if (deferred !== undefined && deferred !== '1') {
        throw badRequest('Upload-Defer-Length must be 1', { field: 'Upload-Defer-Length' });
      }
      const length = uploadLengthOf(request.headers['upload-length']);
      if ((length === undefined) === (deferred === undefined)) {
        throw badRequest('Send either Upload-Length or Upload-Defer-Length: 1', { field: 'Upload-Length' });
      }
      const state = await uploads.create(caller, {
        length,
        metadata: header(request, 'upload-metadata'),
        body: bodyOf(request, false),
      });
      answer(reply, state);
      return reply
        .code(201)
        .headers({ location: `${config.publicUrl}${MOUNT}/${state.id}`, 'x-coffer-file-id': state.fileId })
        .send();
    });

    const head = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
      const state = await uploads.head(callerOf(request), request.params.id);
      answer(reply, state);
      reply.header('cache-control', 'no-store').header('x-coffer-file-id', state.fileId);
      if (state.length === null) reply.header('upload-defer-length', '1');
      else reply.header('upload-length', String(state.length));
      if (state.metadata) reply.header('upload-metadata', state.metadata);
      return reply.code(200).send();
    };
    const patch = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
      const offset = headerNumber(request.headers['upload-offset'], 'Upload-Offset');
      if (offset === undefined) throw badRequest('Upload-Offset is required', { field: 'Upload-Offset' });
      const state = await uploads.patch(callerOf(request), request.params.id, {
        offset,
        length: uploadLengthOf(request.headers['upload-length']),
        body: bodyOf(request, true)!,
      });
      answer(reply, state);
      return reply.code(204).send();
    };
    const terminate = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
      await uploads.terminate(callerOf(request), request.params.id);
      return reply.code(204).send();
    };
    app.head(`${MOUNT}/:id`, authenticated, head);
    app.patch(`${MOUNT}/:id`, authenticated, patch);
    app.delete(`${MOUNT}/:id`, authenticated, terminate);
    // A POST standing in for PATCH, HEAD or DELETE was routed as that method (overrideTusMethod).
    app.post(`${MOUNT}/:id`, authenticated, async () => {
      throw badRequest('POST to an upload needs X-HTTP-Method-Override: PATCH, HEAD or DELETE', {
        field: 'X-HTTP-Method-Override',
      });
    });
  };
}
