import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ISO_8601_PATTERN } from '../../src/domain/dates.ts';
import { ERROR_CODES, type ErrorCode } from '../../src/domain/errors.ts';
import { statusOf } from '../../src/http/errors.ts';
import { CONTENT_TYPE_PATTERN, MIME_PATTERN_PATTERN } from '../../src/lib/mime.ts';
import { EVENT_TYPES } from '../../src/modules/events/types.ts';
import { SESSION_STATUSES } from '../../src/modules/uploads/session-repo.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';

type Schema = Record<string, any>;
interface Operation {
  method: string;
  path: string;
  operation: Schema;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];
const COMPONENT = '#/components/schemas/';

function operationsOf(document: Schema): Operation[] {
  return Object.entries(document.paths as Record<string, Schema>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method]).map((method) => ({ method, path, operation: item[method] })),
  );
}

/** The component names a part of the document refers to with $ref. */
function refsIn(node: unknown, found = new Set<string>()): Set<string> {
  if (Array.isArray(node)) for (const item of node) refsIn(item, found);
  else if (typeof node === 'object' && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') found.add(value);
      else refsIn(value, found);
    }
  }
  return found;
}

/** The JSON bodies an operation takes and answers: each should be a reference to a component. */
function bodiesOf({ operation }: Operation): Schema[] {
  const media = [
    operation.requestBody?.content,
    ...Object.values((operation.responses ?? {}) as Record<string, Schema>).map(
      (response) => response.content,
    ),
  ];
  return media.flatMap((content) => (content ? Object.values(content as Record<string, Schema>) : []));
}

let coffer: TestCoffer;
let document: Schema;
beforeAll(async () => {
  coffer = await startCoffer();
  const reply = await coffer.call('GET', '/openapi.json');
  expect(reply.status).toBe(200);
  document = reply.body;
});
afterAll(() => coffer.close());

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    expect(document.openapi).toMatch(/^3\.1\./);
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('gives every operation a unique camelCase operationId', () => {
    const operations = operationsOf(document);
    expect(operations.length).toBeGreaterThan(40);
    const missing = operations.filter(({ operation }) => !operation.operationId);
    expect(missing.map(({ method, path }) => `${method} ${path}`)).toEqual([]);
    const ids = operations.map(({ operation }) => operation.operationId as string);
    expect(ids.filter((id, index) => ids.indexOf(id) !== index)).toEqual([]);
    for (const id of ids) expect(id).toMatch(/^[a-z]+(?:[A-Z][a-z0-9]*)*$/);
  });

  it('names the operations the client is generated with', () => {
    const byRoute = Object.fromEntries(
      operationsOf(document).map(({ method, path, operation }) => [
        `${method} ${path}`,
        operation.operationId,
      ]),
    );
    const files = '/v1/projects/{project_id}/files';
    const multipart = `${files}/upload/multipart/{upload_id}`;
    const webhook = '/v1/projects/{project_id}/webhooks/{webhook_id}';
    expect(byRoute).toMatchObject({
      [`post ${files}/upload`]: 'initiateUpload',
      [`post ${files}/{file_id}/confirm`]: 'confirmUpload',
      [`get ${files}`]: 'listFiles',
      [`get ${files}/{file_id}`]: 'getFile',
      [`get ${files}/{file_id}/download`]: 'downloadFile',
      [`get ${files}/{file_id}/render`]: 'renderFile',
      [`post ${files}/upload/multipart/start`]: 'startMultipartUpload',
      [`get ${multipart}/part-url`]: 'getPartUrl',
      [`post ${multipart}/complete`]: 'completeMultipartUpload',
      [`delete ${multipart}`]: 'abortMultipartUpload',
      [`get ${multipart}`]: 'getMultipartUpload',
      'post /v1/projects/{project_id}/upload-tokens': 'createUploadToken',
      [`get ${files}/{file_id}/versions`]: 'listFileVersions',
      [`post ${files}/{file_id}/versions/{version_id}/restore`]: 'restoreFileVersion',
      'post /v1/projects/{project_id}/webhooks': 'createWebhook',
      [`get ${webhook}/deliveries`]: 'listWebhookDeliveries',
      [`post ${webhook}/deliveries/{delivery_id}/redeliver`]: 'redeliverWebhookDelivery',
      'get /health/ready': 'getHealthReady',
    });
  });

  it('keeps the object store routes, presigned renditions and the document itself out', () => {
    const paths = Object.keys(document.paths);
    expect(
      paths.filter((path) => /^\/(objects|renditions)\b/.test(path) || path === '/openapi.json'),
    ).toEqual([]);
  });

  it('describes the render route: its parameters, the image formats it answers and its errors', () => {
    const files = '/v1/projects/{project_id}/files/{file_id}';
    const render = document.paths[`${files}/render`].get;
    const query = Object.fromEntries(
      (render.parameters as Schema[]).filter((p) => p.in === 'query').map((p) => [p.name, p.schema]),
    );
    expect(query).toEqual({
      width: { type: 'integer', minimum: 1, maximum: 4096 },
      height: { type: 'integer', minimum: 1, maximum: 4096 },
      fit: { type: 'string', enum: ['cover', 'contain', 'fill', 'inside'] },
      format: { type: 'string', enum: ['auto', 'webp', 'avif', 'jpeg', 'png'] },
      quality: { type: 'integer', minimum: 1, maximum: 100 },
      animated: { type: 'boolean' },
    });
    expect(render.security).toEqual([{ bearer: [] }]);
    expect(render.description).toContain('Requires: scope files:read.');
    expect(Object.keys(render.responses[200].content)).toEqual([
      'image/webp',
      'image/avif',
      'image/jpeg',
      'image/png',
    ]);
    expect(document.components.schemas.RenditionImage).toMatchObject({ type: 'string', format: 'binary' });
    // The download takes the same parameters (then answering a rendition's URL), beside ttl.
    const download = (document.paths[`${files}/download`].get.parameters as Schema[])
      .filter((p) => p.in === 'query')
      .map((p) => p.name);
    expect(download.sort()).toEqual(['ttl', ...Object.keys(query)].sort());
  });

  it('names the main objects as components, and operations refer to them instead of copying them', () => {
    const schemas = document.components.schemas as Record<string, Schema>;
    const main = [
      'File',
      'FileList',
      'Folder',
      'FolderList',
      'Project',
      'ApiKey',
      'ApiKeyList',
      'UploadToken',
      'Webhook',
      'WebhookList',
      'Delivery',
      'DeliveryList',
      'FileVersion',
      'FileVersionList',
      'MultipartUpload',
      'PresignedUrl',
      'PartUrl',
      'Error',
    ];
    // Referred to by an operation, or by another component (ApiKey by ApiKeyList).
    const referred = refsIn(document);
    for (const name of main) {
      expect(schemas, name).toHaveProperty(name);
      expect(referred, name).toContain(`${COMPONENT}${name}`);
    }
    expect(schemas.FileList!.properties.items.items).toEqual({ $ref: `${COMPONENT}File` });
    for (const ref of referred) {
      expect(ref.startsWith(COMPONENT), ref).toBe(true);
      expect(schemas, ref).toHaveProperty(ref.slice(COMPONENT.length));
    }
    for (const operation of operationsOf(document)) {
      for (const media of bodiesOf(operation)) {
        expect(Object.keys(media.schema), `${operation.method} ${operation.path}`).toEqual(['$ref']);
      }
    }
  });

  it('answers errors with one union: the codes of the error catalogue', () => {
    const code = document.components.schemas.Error.properties.error.properties.code;
    expect(code.enum).toEqual([...ERROR_CODES]);
    // The spec's codes and the contract's, spelled as they spell them.
    expect(ERROR_CODES).toEqual(
      expect.arrayContaining([
        'BAD_REQUEST',
        'UNAUTHENTICATED',
        'TOKEN_EXPIRED',
        'INSUFFICIENT_SCOPE',
        'PERMISSION_DENIED',
        'TOKEN_LIMIT_REACHED',
        'QUOTA_EXCEEDED',
        'NOT_FOUND',
        'webhook_not_found',
        'CONFLICT',
        'LEGAL_HOLD',
        'VERSIONING_DISABLED',
        'INVALID_STATE',
        'FILE_TOO_LARGE',
        'REQUEST_TOO_LARGE',
        'RANGE_NOT_SATISFIABLE',
        'VALIDATION_ERROR',
        'invalid_url',
        'RATE_LIMITED',
        'STORE_UNAVAILABLE',
        'INTERNAL',
      ]),
    );
  });

  it('declares the error statuses of every operation, each with the codes it stands for', () => {
    for (const { method, path, operation } of operationsOf(document).filter(({ path }) =>
      path.startsWith('/v1/'),
    )) {
      const where = `${method} ${path}`;
      const responses = operation.responses as Record<string, Schema>;
      expect(responses, where).not.toHaveProperty('default');
      // Every authenticated operation: unreadable, who, may they, too many, failed, database down.
      for (const status of ['400', '401', '403', '429', '500', '503'])
        expect(responses, where).toHaveProperty(status);
      for (const [status, response] of Object.entries(responses).filter(
        ([status]) => Number(status) >= 400,
      )) {
        expect(response.content['application/json'].schema, where).toEqual({ $ref: `${COMPONENT}Error` });
        const codes = (response.description as string).split(', ');
        for (const code of codes) {
          expect(ERROR_CODES, where).toContain(code);
          expect(statusOf(code as ErrorCode), `${where} ${code}`).toBe(Number(status));
        }
      }
      // A body that can break a rule or be too large says so.
      if (operation.requestBody) {
        expect(responses['413']?.description, where).toContain('REQUEST_TOO_LARGE');
        expect(responses['422']?.description, where).toContain('VALIDATION_ERROR');
      }
    }
    const webhook = document.paths['/v1/projects/{project_id}/webhooks/{webhook_id}'];
    expect(webhook.get.responses['404'].description).toBe('NOT_FOUND, webhook_not_found');
    expect(webhook.put.responses['422'].description).toBe('VALIDATION_ERROR, invalid_url');
    const upload = document.paths['/v1/projects/{project_id}/files/upload/multipart/start'].post.responses;
    expect(upload['503'].description).toBe('DATABASE_UNAVAILABLE, STORE_UNAVAILABLE');
    expect(upload['403'].description).toContain('QUOTA_EXCEEDED');
  });
});

describe('the rules the document states', () => {
  const parameter = (path: string, name: string, method = 'get') =>
    (document.paths[path][method].parameters as Schema[]).find((item) => item.name === name)!;
  const component = (name: string) => document.components.schemas[name] as Schema;

  it('does not require a query parameter that has a default', () => {
    for (const [path, name] of [
      ['/v1/projects/{project_id}/audit-log', 'limit'],
      ['/v1/organizations/{org_id}/audit-log', 'limit'],
      ['/v1/projects/{project_id}/files', 'limit'],
      ['/v1/projects/{project_id}/files', 'offset'],
    ] as const) {
      expect(parameter(path, name), `${path} ${name}`).toMatchObject({ required: false });
      expect(parameter(path, name).schema.default, `${path} ${name}`).toBeDefined();
    }
    expect(component('SetMetadataSchemaRequest').required).toEqual(['schema']);
  });

  it('requires a request body only where a field of it is required', () => {
    const body = (path: string, method: string) => document.paths[path][method].requestBody;
    expect(body('/v1/projects/{project_id}', 'patch').required).toBe(false);
    expect(body('/v1/projects/{project_id}/folders/{folder_id}', 'patch').required).toBe(false);
    expect(body('/v1/projects/{project_id}/webhooks/{webhook_id}', 'put').required).toBe(false);
    expect(body('/v1/projects/{project_id}/files/{file_id}/legal-hold', 'put').required).toBe(false);
    expect(body('/v1/projects/{project_id}/webhooks', 'post').required).toBe(true);
    expect(body('/v1/projects/{project_id}/files/upload', 'post').required).toBe(true);
  });

  it('states the forms, bounds and words the server checks', () => {
    const files = '/v1/projects/{project_id}/files';
    for (const [path, name] of [
      [files, 'date_from'],
      [files, 'date_to'],
      ['/v1/projects/{project_id}/audit-log', 'from'],
      ['/v1/projects/{project_id}/audit-log', 'to'],
    ] as const) {
      expect(parameter(path, name).schema.pattern, name).toBe(ISO_8601_PATTERN);
    }
    for (const path of [
      `${files}/{file_id}/download`,
      `${files}/{file_id}/versions/{version_id}/download`,
      `${files}/upload/multipart/{upload_id}/part-url`,
    ]) {
      expect(parameter(path, 'ttl').schema, path).toMatchObject({ minimum: 60, maximum: 86_400 });
    }
    const webhook = component('CreateWebhookRequest').properties;
    expect(webhook.url).toMatchObject({ format: 'uri', pattern: '^https://', maxLength: 2048 });
    expect(webhook.events).toMatchObject({ minItems: 1, items: { enum: [...EVENT_TYPES] } });
    expect(component('MultipartUpload').properties.status.enum).toEqual([...SESSION_STATUSES]);
    expect(parameter(files, 'cursor').schema.pattern).toBe('^file_[0-9A-HJKMNP-TV-Z]{26}$');
    expect(parameter('/v1/projects/{project_id}/audit-log', 'cursor').schema.pattern).toMatch(/^\^aud_/);
    const mimeTypes = component('CreateUploadTokenRequest').properties.allowed_mime_types;
    expect(mimeTypes).toMatchObject({ minItems: 1, items: { pattern: MIME_PATTERN_PATTERN } });
    expect(new RegExp(CONTENT_TYPE_PATTERN).test(' Text/Plain; charset=utf-8')).toBe(true);
    expect(component('InitiateUploadRequest').properties.content_type.pattern).toBe(CONTENT_TYPE_PATTERN);
    expect(component('InitiateUploadRequest').properties.filename).toMatchObject({
      minLength: 1,
      maxLength: 255,
    });
    expect(component('CreateFolderRequest').properties.name).toMatchObject({ minLength: 1, maxLength: 255 });
  });
});

// Bodies are now validated through $refs to the named schemas: the same answers as when they were inline.
describe('request bodies validated through their named schemas', () => {
  let project: TestProject;
  beforeAll(async () => {
    project = await coffer.newProject();
  });

  it('answers a wrong type or an unknown field with 400, a broken rule with 422', async () => {
    const upload = (body: unknown) => project.call('POST', '/files/upload', { body });
    const valid = { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1 };
    expect((await upload({ ...valid, size_bytes: '1' })).body.error).toMatchObject({
      code: 'BAD_REQUEST',
      details: { field: 'size_bytes', location: 'body' },
    });
    expect((await upload({ ...valid, color: 'red' })).body.error).toMatchObject({
      code: 'BAD_REQUEST',
      message: 'color is not a known field',
    });
    expect((await upload({ ...valid, size_bytes: -1 })).body.error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'size_bytes' },
    });
    // A rule inside a schema that the body's schema refers to (the project settings).
    const settings = await coffer.call('PATCH', `/v1/projects/${project.id}`, {
      token: ADMIN_KEY,
      body: { settings: { signed_url_ttl_seconds: 1 } },
    });
    expect(settings.status).toBe(422);
    expect(settings.body.error.details.field).toBe('settings.signed_url_ttl_seconds');
    const scopes = await coffer.call('POST', `/v1/projects/${project.id}/api-keys`, {
      token: ADMIN_KEY,
      body: { name: 'k', scopes: ['files:everything'] },
    });
    expect(scopes.status).toBe(422);
    expect(scopes.body.error.message).toMatch(/^scopes\.0 must be one of: /);
  });

  it('takes a body whose fields are all optional left out, and fills in what has a default', async () => {
    const folder = await project.call('POST', '/folders', { body: { name: 'kept' } });
    expect(folder.status).toBe(201);
    const unchanged = await project.call('PATCH', `/folders/${folder.body.id}`);
    expect(unchanged.status).toBe(200);
    expect(unchanged.body.name).toBe('kept');
    const log = await coffer.call('GET', `/v1/projects/${project.id}/audit-log`, { token: ADMIN_KEY });
    expect(log.status).toBe(200);
    expect(log.body.limit).toBe(50);
  });

  it('still fills in defaults', async () => {
    const reply = await project.call('PUT', '/metadata-schema', { body: { schema: { type: 'object' } } });
    expect(reply.status).toBe(200);
    expect(reply.body.is_active).toBe(true);
  });
});
