import cors from '@fastify/cors';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import secureJson from 'secure-json-parse';
import type { Config } from './config.ts';
import { installAuth } from './http/auth.ts';
import { installErrorHandling } from './http/error-handler.ts';
import { badRequest } from './http/errors.ts';
import { ErrorBody } from './http/schemas.ts';
import { localObjectRoutes } from './infra/storage/local.ts';
import { fileRoutes } from './modules/files/routes.ts';
import { folderRoutes } from './modules/folders/routes.ts';
import { healthRoutes } from './modules/health/routes.ts';
import { metadataSchemaRoutes } from './modules/metadata-schema/routes.ts';
import { projectRoutes } from './modules/projects/routes.ts';
import { uploadRoutes } from './modules/uploads/routes.ts';
import { versionRoutes } from './modules/versions/routes.ts';
import { webhookRoutes } from './modules/webhooks/routes.ts';
import type { Services } from './services.ts';

/** JSON bodies above this are refused with 413 REQUEST_TOO_LARGE (file bytes never travel as JSON). */
export const JSON_BODY_LIMIT = 1024 * 1024;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function validators() {
  const options = {
    useDefaults: true,
    removeAdditional: false,
    allowUnionTypes: true,
    strict: false,
  } as const;
  // Bodies keep their JSON types (a string "5" is not a number); query strings and paths are text and are coerced.
  const body = addFormats.default(new Ajv.default({ ...options, coerceTypes: false }));
  const text = addFormats.default(new Ajv.default({ ...options, coerceTypes: 'array' }));
  return { body, text };
}

const isStorable = (text: string) => !text.includes('\u0000') && text.isWellFormed();
// Parsed JSON, query strings and path parameters are arrays and plain or prototype-less objects (the
// query parser's objects have one prototype without a parent); a Buffer or stream is not looked into.
const isPlainData = (value: object) => {
  const prototype = Object.getPrototypeOf(value);
  return Array.isArray(value) || prototype === null || Object.getPrototypeOf(prototype) === null;
};

/**
 * Where a request value (parsed JSON, query or path parameters) holds a string PostgreSQL cannot
 * store: one with a NUL, or with an unpaired UTF-16 surrogate that would silently turn into U+FFFD.
 * Answers the dotted path of that string, or of the object whose key it is ('' for the value itself).
 */
function unstorableField(root: unknown): string | undefined {
  // A loop rather than recursion: a deeply nested body must not exhaust the stack.
  const pending: Array<[unknown, string]> = [[root, '']];
  while (pending.length > 0) {
    const [value, path] = pending.pop()!;
    if (typeof value === 'string') {
      if (!isStorable(value)) return path;
    } else if (typeof value === 'object' && value !== null && isPlainData(value)) {
      for (const [key, item] of Object.entries(value)) {
        if (!isStorable(key)) return path;
        pending.push([item, path ? `${path}.${key}` : key]);
      }
    }
  }
  return undefined;
}

export interface AppOptions {
  config: Config;
  services: Services;
  /** Request logging; none when absent (tests). */
  logger?: Logger;
}

export async function buildApp({ config, services, logger }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger | undefined,
    // Requests are logged once, on completion, without query strings (presigned URLs carry signatures there).
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: config.trustProxy,
    bodyLimit: JSON_BODY_LIMIT,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : `req_${crypto.randomUUID()}`;
    },
    routerOptions: { ignoreTrailingSlash: true },
    ajv: { customOptions: { strict: false } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  const ajv = validators();
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? ajv.body : ajv.text).compile(schema as object),
  );

  // An empty body reads as {} (a confirm sent with Content-Type: application/json and nothing else),
  // so that a missing required field is reported by name.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    if (body === '') return done(null, {});
    try {
      done(
        null,
        secureJson.parse(body as string, undefined, { protoAction: 'remove', constructorAction: 'remove' }),
      );
    } catch {
      done(badRequest('The request body is not valid JSON'), undefined);
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.info(
      {
        method: request.method,
        path: request.url.split('?')[0],
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
        ip: request.ip,
      },
      'request',
    );
  });
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined && request.routeOptions.schema?.body) request.body = {};
  });
  app.addHook('preValidation', async (request) => {
    const parts = { params: request.params, querystring: request.query, body: request.body };
    for (const [location, value] of Object.entries(parts)) {
      const path = unstorableField(value);
      if (path === undefined) continue;
      const field = path || location;
      throw badRequest(`${field} must not contain NUL characters or unpaired UTF-16 surrogates`, {
        field,
        location,
      });
    }
  });
  installErrorHandling(app);

  await app.register(cors, {
    origin: config.corsOrigins === '*' ? '*' : config.corsOrigins,
    methods: ['GET', 'HEAD', 'PUT', 'POST', 'PATCH', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'Range', 'X-Request-Id'],
    exposedHeaders: [
      'ETag',
      'Content-Range',
      'Content-Disposition',
      'Content-Length',
      'Retry-After',
      'X-Request-Id',
    ],
    maxAge: 600,
    strictPreflight: false,
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Coffer API',
        version: '1.0.0',
        description:
          'File storage for applications: presigned and multipart uploads, browser upload tokens, scanning, search, versions and signed webhooks.',
      },
      servers: [{ url: config.publicUrl }],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key (coffer_live_…), an upload token (coffer_upload_token_…) or the admin key (coffer_admin_…)',
          },
        },
      },
    },
    transform: ({ schema, url, route }) => {
      const access = route.config?.access;
      const documented = { ...schema } as Record<string, unknown>;
      if (access && access !== 'public') {
        documented.security = [{ bearer: [] }];
        documented.description = [
          schema?.description,
          `Requires: ${access === 'admin' ? 'the admin key' : `scope ${access}`}.`,
        ]
          .filter(Boolean)
          .join('\n\n');
      }
      return { schema: documented, url };
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.addSchema(ErrorBody);
  app.get('/openapi.json', { schema: { hide: true }, config: { access: 'public' } }, async () =>
    app.swagger(),
  );

  installAuth(app, services.credentials);
  await app.register(healthRoutes(services.db, services.cache));
  if (services.store.kind === 'local') await app.register(localObjectRoutes(services.store));
  await app.register(
    async (v1) => {
      await v1.register(projectRoutes(services.projects));
      await v1.register(uploadRoutes(services.uploads, services.tokens, services.multipart));
      await v1.register(fileRoutes(services.files));
      await v1.register(folderRoutes(services.folders));
      await v1.register(metadataSchemaRoutes(services.schemas));
      await v1.register(webhookRoutes(services.webhooks));
      await v1.register(versionRoutes(services.versions));
    },
    { prefix: '/v1' },
  );
  return app;
}
