import cors from '@fastify/cors';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import secureJson from 'secure-json-parse';
import type { Config } from './config.ts';
import { badRequest } from './domain/errors.ts';
import { installAuth } from './http/auth.ts';
import { consoleRoutes } from './http/console.ts';
import {
  answerClientError,
  answerFrameworkError,
  installErrorHandling,
  jsonAnswer,
  MAX_PARAM_LENGTH,
} from './http/error-handler.ts';
import { continueOnRead } from './http/expect-continue.ts';
import { endIdleBodies } from './http/idle-bodies.ts';
import { objectRoutes } from './http/object-routes.ts';
import { optionalBodies } from './http/openapi-bodies.ts';
import { createRateLimits } from './http/rate-limit.ts';
import { drainRefusedBodies } from './http/refused-body.ts';
import { installRequestMetrics } from './http/request-metrics.ts';
import { schemaCompilers } from './http/schema-compilers.ts';
import { ErrorBody } from './http/schemas.ts';
import { isLocalStore } from './infra/storage/local/store.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './lib/json-depth.ts';
import { auditRoutes } from './modules/audit/routes.ts';
import { auditSchemas } from './modules/audit/schemas.ts';
import { fileRoutes } from './modules/files/routes.ts';
import { fileSchemas } from './modules/files/schemas.ts';
import { folderRoutes } from './modules/folders/routes.ts';
import { folderSchemas } from './modules/folders/schemas.ts';
import { healthRoutes } from './modules/health/routes.ts';
import { healthSchemas } from './modules/health/schemas.ts';
import { metadataSchemaRoutes } from './modules/metadata-schema/routes.ts';
import { metadataSchemaSchemas } from './modules/metadata-schema/schemas.ts';
import { projectRoutes } from './modules/projects/routes.ts';
import { projectSchemas } from './modules/projects/schemas.ts';
import { renditionRoutes, signedRenditionRoutes } from './modules/renditions/routes.ts';
import { renditionSchemas } from './modules/renditions/schemas.ts';
import { s3CredentialRoutes } from './modules/s3-credentials/routes.ts';
import { s3CredentialSchemas } from './modules/s3-credentials/schemas.ts';
import { uploadRoutes } from './modules/uploads/routes.ts';
import { uploadSchemas } from './modules/uploads/schemas.ts';
import { usageRoutes } from './modules/usage/routes.ts';
import { usageSchemas } from './modules/usage/schemas.ts';
import { versionRoutes } from './modules/versions/routes.ts';
import { versionSchemas } from './modules/versions/schemas.ts';
import { webhookRoutes } from './modules/webhooks/routes.ts';
import { webhookSchemas } from './modules/webhooks/schemas.ts';
import { s3CorsFor } from './protocols/s3/cors.ts';
import { isS3Url, refuseS3Url, s3RequestIds, s3RequestTimeout, s3Routes } from './protocols/s3/routes.ts';
import { tusCorsFor } from './protocols/tus/cors.ts';
import { underMount as underTusMount } from './protocols/tus/protocol.ts';
import { overrideTusMethod, tusResumable, tusRoutes } from './protocols/tus/routes.ts';
import type { Services } from './services.ts';

/** JSON bodies above this are refused with 413 REQUEST_TOO_LARGE (file bytes never travel as JSON). */
export const JSON_BODY_LIMIT = 1024 * 1024;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** How the OpenAPI document names what an endpoint requires, where it is not one scope. */
const REQUIREMENTS: Record<string, string> = {
  admin: 'the admin key',
  authenticated: 'any API key, upload token or the admin key',
};

/**
 * The request and response bodies that have a name (`$id`): each is registered once and routes refer
 * to it with `$ref`, so that it is one component of the OpenAPI document, named by its `$id`.
 */
const NAMED_SCHEMAS = [
  ErrorBody,
  ...healthSchemas,
  ...projectSchemas,
  ...s3CredentialSchemas,
  ...fileSchemas,
  ...renditionSchemas,
  ...uploadSchemas,
  ...folderSchemas,
  ...metadataSchemaSchemas,
  ...webhookSchemas,
  ...versionSchemas,
  ...usageSchemas,
  ...auditSchemas,
];

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
  if (typeof root === 'string') return isStorable(root) ? undefined : '';
  if (typeof root !== 'object' || root === null || !isPlainData(root)) return undefined;
  // Breadth first over the containers only, without recursion (a deeply nested body must not exhaust
  // the stack); a path is spelled out only for the field that fails.
  const containers: object[] = [root];
  const parents: number[] = [-1];
  const keys: string[] = [''];
  const pathOf = (index: number, key?: string) => {
    const names = key === undefined ? [] : [key];
    for (let at = index; at > 0; at = parents[at]!) names.unshift(keys[at]!);
    return names.join('.');
  };
  for (let index = 0; index < containers.length; index++) {
    const container = containers[index] as Record<string, unknown>;
    for (const key in container) {
      if (!Object.hasOwn(container, key)) continue;
      if (!isStorable(key)) return pathOf(index);
      const item = container[key];
      if (typeof item === 'string') {
        if (!isStorable(item)) return pathOf(index, key);
      } else if (typeof item === 'object' && item !== null && isPlainData(item)) {
        containers.push(item);
        parents.push(index);
        keys.push(key);
      }
    }
  }
  return undefined;
}

/** Only JSON that spells out a NUL or a surrogate as an escape can parse into an unstorable string. */
const MAY_BE_UNSTORABLE = /\\u(?:0000|[dD][89a-fA-F])/;

const unstorable = (field: string, location: string) =>
  badRequest(`${field} must not contain NUL characters or unpaired UTF-16 surrogates`, { field, location });

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
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Fastify's one step before routing: a tus POST standing in for another method is routed as that one.
    rewriteUrl: (req) => {
      overrideTusMethod(req);
      return req.url!;
    },
    // Answered before any hook runs: in S3's words under /s3, and with tus's header under /tus.
    frameworkErrors: (error, request, reply) => {
      // No onRequest hook names these answers: they come before them.
      reply.header('x-request-id', request.id);
      if (isS3Url(request.url)) return refuseS3Url(request, reply);
      tusResumable(request, reply);
      return answerFrameworkError(error, request, reply);
    },
    clientErrorHandler: answerClientError,
    ajv: { customOptions: { strict: false } },
  }).withTypeProvider<TypeBoxTypeProvider>();
  // 100 Continue once a body is read, not before the request is looked at (expect-continue.ts).
  continueOnRead(app.server);
  // The rest of a body answered before its end (a refusal) is read up to a bound, then the connection closes.
  drainRefusedBodies(app);
  // A body that stops arriving is answered in its dialect (tus's clients resume after a drop).
  endIdleBodies(app, (request, seconds) => {
    if (isS3Url(request.url)) return s3RequestTimeout(request);
    if (underTusMount(request.url)) return undefined;
    return jsonAnswer(408, 'BAD_REQUEST', `No byte of the request body arrived for ${seconds} s`, request.id);
  });

  const compilers = schemaCompilers(NAMED_SCHEMAS);
  app.setValidatorCompiler(compilers.validators);
  app.setSerializerCompiler(compilers.serializers);
  app.decorate('compileSchemas', compilers.compileAll);

  // An empty body reads as {} (a confirm sent with Content-Type: application/json and nothing else),
  // so that a missing required field is reported by name.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    if (body === '') return done(null, {});
    if (nestsDeeperThan(body as string, MAX_JSON_DEPTH)) {
      return done(
        badRequest(`The request body nests deeper than ${MAX_JSON_DEPTH} levels`, {
          field: 'body',
          max_depth: MAX_JSON_DEPTH,
        }),
        undefined,
      );
    }
    let parsed: unknown;
    try {
      // Keys that would reach an object's prototype are refused, as any key the schema does not know is.
      parsed = secureJson.parse(body as string, undefined, {
        protoAction: 'error',
        constructorAction: 'error',
      });
    } catch (error) {
      const forbidden = error instanceof SyntaxError && /forbidden prototype/.test(error.message);
      return done(
        forbidden
          ? badRequest('The request body must not have a __proto__ key, nor constructor.prototype', {
              field: 'body',
            })
          : badRequest('The request body is not valid JSON'),
        undefined,
      );
    }
    const path = MAY_BE_UNSTORABLE.test(body as string) ? unstorableField(parsed) : undefined;
    if (path !== undefined) return done(unstorable(path || 'body', 'body'), undefined);
    done(null, parsed);
  });

  // Every answer is named before any other hook runs (refusals and CORS preflights included): its
  // request id, and under a protocol's mount what that protocol adds (S3's ids, tus's version).
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    s3RequestIds(request, reply);
    tusResumable(request, reply);
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
  // JSON bodies are checked as they are parsed; query strings and path parameters here.
  app.addHook('preValidation', async (request) => {
    for (const [location, value] of [
      ['params', request.params],
      ['querystring', request.query],
    ] as const) {
      const path = unstorableField(value);
      if (path !== undefined) throw unstorable(path || location, location);
    }
  });
  installErrorHandling(app);
  if (services.metrics) installRequestMetrics(app, services.metrics);

  const restCors = {
    origin: config.corsOrigins === '*' ? '*' : config.corsOrigins,
    methods: ['GET', 'HEAD', 'PUT', 'POST', 'PATCH', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'Range', 'If-None-Match', 'X-Request-Id'],
    exposedHeaders: [
      'ETag',
      'Content-Range',
      'Content-Disposition',
      'Content-Length',
      'Retry-After',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'X-Request-Id',
    ],
    maxAge: 600,
    strictPreflight: false,
  };
  // Each protocol's CORS under its mount (S3 and tus clients send headers of their own), the REST API's elsewhere.
  const byProtocol = [s3CorsFor(restCors), tusCorsFor(restCors)];
  await app.register(cors, {
    delegator: (request, done) =>
      done(null, byProtocol.map((rule) => rule(request)).find(Boolean) ?? restCors),
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Coffer API',
        version: '1.0.0',
        description:
          'File storage for applications: presigned and multipart uploads, browser upload tokens, scanning, search, versions and signed webhooks.\n\n' +
          'Requests are rate limited per API key, per upload token and per client IP: counted answers carry RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, and past a limit the answer is 429 RATE_LIMITED with Retry-After.\n\n' +
          'A dependency that fails is named, and nothing is half-done: 503 DATABASE_UNAVAILABLE or 503 STORE_UNAVAILABLE (send the request again), 507 STORAGE_FULL when the store has no space left for the bytes of a PUT.',
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
    // Components are named by their $id (File, Error…) rather than def-0, def-1…: a generated client's type names.
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
    transformObject: (document) => optionalBodies('openapiObject' in document ? document.openapiObject : {}),
    transform: ({ schema, url, route }) => {
      const access = route.config?.access;
      const documented = { ...schema } as Record<string, unknown>;
      if (access && access !== 'public') {
        documented.security = [{ bearer: [] }];
        documented.description = [
          schema?.description,
          `Requires: ${route.config?.requirement ?? REQUIREMENTS[access] ?? `scope ${access}`}.`,
        ]
          .filter(Boolean)
          .join('\n\n');
      }
      return { schema: documented, url };
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  for (const schema of NAMED_SCHEMAS) app.addSchema(schema);
  app.get('/openapi.json', { schema: { hide: true }, config: { access: 'public' } }, async () =>
    app.swagger(),
  );

  // Rate limits around authentication: what needs no credential and refused guessers before it, each
  // caller's own limit after it.
  const limits = await createRateLimits(app, config.rateLimits, services.cache);
  app.addHook('onRequest', async (request) => request.routeOptions.config.precondition?.(request));
  app.addHook('onRequest', limits.beforeAuth);
  installAuth(app, services.credentials);
  app.addHook('onRequest', limits.afterAuth);
  await app.register(healthRoutes(services.db, services.cache, services.store));
  if (isLocalStore(services.store)) await app.register(objectRoutes(services.store, services.metrics));
  await app.register(signedRenditionRoutes(services.renditions));
  await app.register(consoleRoutes(services.store, { publicUrl: config.publicUrl }));
  await app.register(
    s3Routes({
      services,
      region: config.s3ApiRegion,
      limits,
    }),
  );
  await app.register(tusRoutes(services));
  await app.register(
    async (v1) => {
      await v1.register(projectRoutes(services.projects));
      await v1.register(s3CredentialRoutes(services.s3Credentials));
      await v1.register(uploadRoutes(services.uploads, services.tokens, services.multipart));
      await v1.register(fileRoutes(services.files, services.renditions));
      await v1.register(renditionRoutes(services.renditions));
      await v1.register(folderRoutes(services.folders));
      await v1.register(metadataSchemaRoutes(services.schemas));
      await v1.register(webhookRoutes(services.webhooks));
      await v1.register(versionRoutes(services.versions));
      await v1.register(usageRoutes(services.usage));
      await v1.register(auditRoutes(services.audit, services.projects));
    },
    { prefix: '/v1' },
  );
  return app;
}
