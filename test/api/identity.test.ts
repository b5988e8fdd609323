/**
 * What a console needs after a sign-in with a bare key: GET /v1/whoami (the credential's kind,
 * project and scopes), and, for the admin key, the projects of an organization.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/modules/projects/schemas.ts';
import { ADMIN_KEY, startCoffer, type TestCoffer } from '../support/coffer.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const admin = { token: ADMIN_KEY };

describe('GET /v1/whoami', () => {
  it('describes an API key: its project and its scopes', async () => {
    const project = await coffer.newProject(undefined, ['files:read', 'files:upload']);
    const reply = await coffer.call('GET', '/v1/whoami', { token: project.key });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      kind: 'api_key',
      project_id: project.id,
      scopes: ['files:read', 'files:upload'],
    });
  });

  it('describes the admin key: no project, every scope', async () => {
    const reply = await coffer.call('GET', '/v1/whoami', admin);
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ kind: 'admin', project_id: null, scopes: [...SCOPES] });
  });

  it('describes an upload token', async () => {
    const project = await coffer.newProject();
    const token = await project.call('POST', '/upload-tokens', { body: {} });
    const reply = await coffer.call('GET', '/v1/whoami', { token: token.body.token });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      kind: 'upload_token',
      project_id: project.id,
      scopes: ['files:upload', 'files:read'],
    });
  });

  it("refuses unknown and revoked keys with the API's message", async () => {
    const project = await coffer.newProject();
    const unknown = await coffer.call('GET', '/v1/whoami', {
      token: 'coffer_live_unknown0000000000000000000000000',
    });
    expect(unknown.status).toBe(401);
    expect(unknown.body.error).toMatchObject({
      code: 'UNAUTHENTICATED',
      message: expect.stringMatching(/unknown/),
    });
    const keys = await coffer.call('GET', `/v1/projects/${project.id}/api-keys`, admin);
    await coffer.call('DELETE', `/v1/projects/${project.id}/api-keys/${keys.body.items[0].id}`, admin);
    expect((await coffer.call('GET', '/v1/whoami', { token: project.key })).status).toBe(401);
    expect((await coffer.call('GET', '/v1/whoami')).status).toBe(401);
  });

  it("applies the key's project IP allowlist (the admin key is exempt)", async () => {
    const project = await coffer.newProject({ ip_allowlist: ['203.0.113.0/24'] });
    const reply = await coffer.call('GET', '/v1/whoami', { token: project.key });
    expect(reply.status).toBe(403);
    expect(reply.body.error.code).toBe('PERMISSION_DENIED');
    expect((await coffer.call('GET', '/v1/whoami', admin)).status).toBe(200);
  });

  it('is in the OpenAPI document, saying that any credential will do', async () => {
    const document = (await coffer.call('GET', '/openapi.json')).body;
    const operation = document.paths['/v1/whoami'].get;
    expect(operation.operationId).toBe('whoami');
    expect(operation.description).toContain('Requires: any API key, upload token or the admin key.');
    expect(operation.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/Identity',
    });
  });
});

describe('GET /v1/organizations/{org_id}/projects', () => {
  it("lists an organization's projects, newest first, with the admin key only", async () => {
    const org = await coffer.call('POST', '/v1/organizations', { ...admin, body: { name: 'Listed' } });
    const path = `/v1/organizations/${org.body.id}/projects`;
    const empty = await coffer.call('GET', path, admin);
    expect(empty.body).toEqual({ items: [], total: 0 });
    const first = await coffer.call('POST', path, { ...admin, body: { name: 'First' } });
    const second = await coffer.call('POST', path, {
      ...admin,
      body: { name: 'Second', settings: { versioning_enabled: true } },
    });
    const other = await coffer.newProject();
    const list = await coffer.call('GET', path, admin);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ items: [second.body, first.body], total: 2 });
    expect(list.body.items[0].settings.versioning_enabled).toBe(true);

    const denied = await coffer.call('GET', path, { token: other.key });
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('INSUFFICIENT_SCOPE');
  });

  it('404s an unknown organization', async () => {
    const reply = await coffer.call(
      'GET',
      '/v1/organizations/org_01ARZ3NDEKTSV4RRFFQ69G5FAV/projects',
      admin,
    );
    expect(reply.status).toBe(404);
    expect(reply.body.error.code).toBe('NOT_FOUND');
  });
});
