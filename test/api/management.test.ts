import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, startCoffer, type TestCoffer } from '../support/coffer.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const admin = { token: ADMIN_KEY };

describe('organizations and projects', () => {
  it('creates and lists organizations with the admin key', async () => {
    const created = await coffer.call('POST', '/v1/organizations', { ...admin, body: { name: 'Acme' } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^org_[0-9A-Z]{26}$/),
      name: 'Acme',
      created_at: expect.any(String),
    });
    const list = await coffer.call('GET', '/v1/organizations', admin);
    expect(list.status).toBe(200);
    expect(list.body.items.map((o: { id: string }) => o.id)).toContain(created.body.id);
    expect(list.body.total).toBe(list.body.items.length);
  });

  it('creates a project with default settings', async () => {
    const org = await coffer.call('POST', '/v1/organizations', { ...admin, body: { name: 'Acme' } });
    const project = await coffer.call('POST', `/v1/organizations/${org.body.id}/projects`, {
      ...admin,
      body: { name: 'Site' },
    });
    expect(project.status).toBe(201);
    expect(project.body).toMatchObject({
      id: expect.stringMatching(/^proj_/),
      organization_id: org.body.id,
      name: 'Site',
      settings: {
        allowed_mime_types: null,
        max_file_size_bytes: null,
        signed_url_ttl_seconds: 3600,
        require_signed_urls: false,
        virus_scan_enabled: false,
        versioning_enabled: false,
        enforce_schema: false,
        ip_allowlist: null,
      },
    });
    expect(project.body.updated_at).toBeTypeOf('string');
  });

  it('404s a project in an unknown organization', async () => {
    const reply = await coffer.call('POST', '/v1/organizations/org_01ARZ3NDEKTSV4RRFFQ69G5FAV/projects', {
      ...admin,
      body: { name: 'x' },
    });
    expect(reply.status).toBe(404);
    expect(reply.body.error.code).toBe('NOT_FOUND');
  });

  it('reads and patches settings partially, normalising MIME lists', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const patched = await project.call('PATCH', '', {
      body: { settings: { allowed_mime_types: ' image/* , application/PDF', max_file_size_bytes: 1000 } },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.settings).toMatchObject({
      allowed_mime_types: 'image/*,application/pdf',
      max_file_size_bytes: 1000,
      versioning_enabled: true,
    });
    const renamed = await project.call('PATCH', '', { body: { name: 'Renamed' } });
    expect(renamed.body).toMatchObject({ name: 'Renamed', settings: { max_file_size_bytes: 1000 } });
    const got = await project.call('GET', '');
    expect(got.status).toBe(200);
    expect(got.body.name).toBe('Renamed');
  });

  it.each([
    [{ signed_url_ttl_seconds: 10 }, 'settings.signed_url_ttl_seconds'],
    [{ signed_url_ttl_seconds: 90000 }, 'settings.signed_url_ttl_seconds'],
    [{ max_file_size_bytes: 0 }, 'settings.max_file_size_bytes'],
    [{ allowed_mime_types: 'image/*,nonsense' }, 'settings.allowed_mime_types'],
    [{ allowed_mime_types: '*/png' }, 'settings.allowed_mime_types'],
    [{ ip_allowlist: ['10.0.0.0/33'] }, 'settings.ip_allowlist'],
    [{ ip_allowlist: ['not-an-ip'] }, 'settings.ip_allowlist'],
    [{ ip_allowlist: ['2001:db8::/129'] }, 'settings.ip_allowlist'],
  ])('refuses the rule-breaking setting %j with 422', async (settings, field) => {
    const project = await coffer.newProject();
    const reply = await project.call('PATCH', '', { body: { settings } });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it.each([
    [{ virus_scan_enabled: 'yes' }, 'settings.virus_scan_enabled'],
    [{ max_file_size_bytes: '100' }, 'settings.max_file_size_bytes'],
    [{ ip_allowlist: '10.0.0.0/8' }, 'settings.ip_allowlist'],
    [{ unknown_setting: true }, 'settings.unknown_setting'],
  ])('refuses the wrongly typed setting %j with 400', async (settings, field) => {
    const project = await coffer.newProject();
    const reply = await project.call('PATCH', '', { body: { settings } });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toMatchObject({ code: 'BAD_REQUEST', details: { field } });
  });
});

describe('names', () => {
  it.each(['', '   ', '\t\n'])('refuses the blank name %j with 422 naming the field', async (name) => {
    const project = await coffer.newProject();
    const org = project.organizationId;
    const replies = [
      await coffer.call('POST', '/v1/organizations', { ...admin, body: { name } }),
      await coffer.call('POST', `/v1/organizations/${org}/projects`, { ...admin, body: { name } }),
      await project.call('PATCH', '', { body: { name } }),
      await coffer.call('POST', `/v1/projects/${project.id}/api-keys`, {
        ...admin,
        body: { name, scopes: ['files:read'] },
      }),
    ];
    for (const reply of replies) {
      expect(reply.status).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'name' } });
    }
    expect((await project.call('GET', '')).body.name).toBe('Test project');
  });
});

describe('API keys', () => {
  it('shows the key once and never lists secrets', async () => {
    const project = await coffer.newProject();
    const created = await coffer.call('POST', `/v1/projects/${project.id}/api-keys`, {
      ...admin,
      body: { name: 'ci', scopes: ['files:read'] },
    });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^coffer_live_[A-Za-z0-9_-]{43}$/);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^key_/),
      name: 'ci',
      scopes: ['files:read'],
    });
    const list = await coffer.call('GET', `/v1/projects/${project.id}/api-keys`, admin);
    expect(list.status).toBe(200);
    expect(list.body.total).toBe(2);
    expect(JSON.stringify(list.body)).not.toContain(created.body.key);
    for (const item of list.body.items) expect(item).not.toHaveProperty('key');
  });

  it('refuses unknown scopes', async () => {
    const project = await coffer.newProject();
    const reply = await coffer.call('POST', `/v1/projects/${project.id}/api-keys`, {
      ...admin,
      body: { name: 'x', scopes: ['files:everything'] },
    });
    expect(reply.status).toBe(422);
    expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'scopes.0' } });
  });

  it('stops a revoked key on its very next request', async () => {
    const project = await coffer.newProject();
    expect((await project.call('GET', '')).status).toBe(200);
    const keys = await coffer.call('GET', `/v1/projects/${project.id}/api-keys`, admin);
    const revoked = await coffer.call(
      'DELETE',
      `/v1/projects/${project.id}/api-keys/${keys.body.items[0].id}`,
      admin,
    );
    expect(revoked.status).toBe(204);
    const after = await project.call('GET', '');
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('UNAUTHENTICATED');
    const again = await coffer.call(
      'DELETE',
      `/v1/projects/${project.id}/api-keys/key_01ARZ3NDEKTSV4RRFFQ69G5FAV`,
      admin,
    );
    expect(again.status).toBe(404);
  });

  it('keeps only a hash of the key', async () => {
    const project = await coffer.newProject();
    const rows = await coffer.services.db.query<Record<string, unknown>>(
      'SELECT * FROM api_keys WHERE project_id = $1',
      [project.id],
    );
    expect(JSON.stringify(rows)).not.toContain(project.key);
    expect(rows[0]!.key_hash).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('authentication and authorization', () => {
  it.each([
    ['missing', undefined],
    ['malformed', 'Basic abc'],
    ['unknown key', `Bearer coffer_live_${'x'.repeat(43)}`],
    ['unknown admin key', `Bearer coffer_admin_${'y'.repeat(43)}`],
    ['unknown prefix', 'Bearer sk_live_123'],
  ])('answers 401 UNAUTHENTICATED for a %s credential', async (_name, authorization) => {
    const project = await coffer.newProject();
    const reply = await coffer.call('GET', `/v1/projects/${project.id}`, {
      headers: authorization ? { authorization } : {},
    });
    expect(reply.status).toBe(401);
    expect(reply.body.error.code).toBe('UNAUTHENTICATED');
  });

  it('reads the Bearer scheme in any case', async () => {
    const project = await coffer.newProject();
    for (const scheme of ['bearer', 'BEARER', 'Bearer']) {
      const reply = await coffer.call('GET', `/v1/projects/${project.id}`, {
        headers: { authorization: `${scheme} ${project.key}` },
      });
      expect(reply.status, scheme).toBe(200);
    }
  });

  it('answers 403 INSUFFICIENT_SCOPE when the key lacks the scope', async () => {
    const project = await coffer.newProject(undefined, ['files:read']);
    const reply = await project.call('PATCH', '', { body: { name: 'x' } });
    expect(reply.status).toBe(403);
    expect(reply.body.error).toMatchObject({
      code: 'INSUFFICIENT_SCOPE',
      details: { required_scope: 'projects:update' },
    });
    expect((await project.call('GET', '/files')).status).toBe(200);
  });

  it('keeps management of keys and organizations to the admin key', async () => {
    const project = await coffer.newProject();
    const keys = await coffer.call('GET', `/v1/projects/${project.id}/api-keys`, { token: project.key });
    expect(keys.status).toBe(403);
    expect(keys.body.error.code).toBe('INSUFFICIENT_SCOPE');
    const orgs = await coffer.call('GET', '/v1/organizations', { token: project.key });
    expect(orgs.status).toBe(403);
  });

  it("answers 404 NOT_FOUND for another project's ids", async () => {
    const a = await coffer.newProject();
    const b = await coffer.newProject();
    const reply = await coffer.call('GET', `/v1/projects/${b.id}`, { token: a.key });
    expect(reply.status).toBe(404);
    expect(reply.body.error.code).toBe('NOT_FOUND');
    const files = await coffer.call('GET', `/v1/projects/${b.id}/files`, { token: a.key });
    expect(files.status).toBe(404);
  });

  it("answers 404 NOT_FOUND, not 403, for admin routes under another project's id", async () => {
    const a = await coffer.newProject();
    const b = await coffer.newProject();
    const keys = await coffer.call('GET', `/v1/projects/${b.id}/api-keys`, admin);
    for (const [method, path, body] of [
      ['GET', '/api-keys', undefined],
      ['POST', '/api-keys', { name: 'x', scopes: ['files:read'] }],
      ['DELETE', `/api-keys/${keys.body.items[0].id}`, undefined],
    ] as const) {
      const reply = await coffer.call(method, `/v1/projects/${b.id}${path}`, { token: a.key, body });
      expect(reply.status, `${method} ${path}`).toBe(404);
      expect(reply.body.error.code).toBe('NOT_FOUND');
    }
    expect((await b.call('GET', '')).status).toBe(200);
  });
});

describe('IP allowlist', () => {
  it('lets callers inside the allowlist through and refuses the others with 403 PERMISSION_DENIED', async () => {
    const inside = await coffer.newProject({ ip_allowlist: ['127.0.0.0/8'] });
    expect((await inside.call('GET', '')).status).toBe(200);
    const outside = await coffer.newProject({ ip_allowlist: ['10.0.0.0/8', '2001:db8::/32'] });
    const refused = await outside.call('GET', '');
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('PERMISSION_DENIED');
    // The admin key is exempt, so an operator can always repair a lock-out.
    expect((await coffer.call('GET', `/v1/projects/${outside.id}`, admin)).status).toBe(200);
  });

  it('matches IPv6 callers against IPv6 CIDRs and IPv4-mapped callers against IPv4 CIDRs', async () => {
    const dual = await startCoffer({ HOST: '::' });
    try {
      const get = (host: string, project: { id: string; key: string }) =>
        fetch(`http://${host}:${dual.config.port}/v1/projects/${project.id}`, {
          headers: { authorization: `Bearer ${project.key}` },
        }).then((r) => r.status);
      const v6only = await dual.newProject({ ip_allowlist: ['::1/128'] });
      expect(await get('[::1]', v6only)).toBe(200);
      expect(await get('127.0.0.1', v6only)).toBe(403);
      // On a dual-stack socket 127.0.0.1 arrives as ::ffff:127.0.0.1 and must match IPv4 rules.
      const v4only = await dual.newProject({ ip_allowlist: ['127.0.0.1/32'] });
      expect(await get('127.0.0.1', v4only)).toBe(200);
      expect(await get('[::1]', v4only)).toBe(403);
    } finally {
      await dual.close();
    }
  });

  it('matches IPv4 callers against IPv4-mapped IPv6 CIDRs', async () => {
    for (const [allowlist, status] of [
      [['::ffff:127.0.0.1/128'], 200],
      [['::ffff:127.0.0.0/104'], 200],
      [['::FFFF:7F00:1/128'], 200],
      [['::ffff:0:0/96'], 200],
      [['::ffff:127.0.0.2/128'], 403],
      [['::ffff:10.0.0.0/104'], 403],
      [['::/0'], 403],
    ] as const) {
      const project = await coffer.newProject({ ip_allowlist: [...allowlist] });
      expect((await project.call('GET', '')).status, allowlist[0]).toBe(status);
    }
  });

  it('ignores X-Forwarded-For unless COFFER_TRUST_PROXY is on', async () => {
    const project = await coffer.newProject({ ip_allowlist: ['203.0.113.0/24'] });
    const spoofed = await project.call('GET', '', { headers: { 'x-forwarded-for': '203.0.113.7' } });
    expect(spoofed.status).toBe(403);

    const proxied = await startCoffer({ COFFER_TRUST_PROXY: 'true' });
    try {
      const call = (ip: string) =>
        proxied.call('GET', `/v1/projects/${project.id}`, {
          token: project.key,
          headers: { 'x-forwarded-for': ip },
        });
      expect((await call('203.0.113.7')).status).toBe(200);
      expect((await call('198.51.100.1')).status).toBe(403);
      const v6 = await proxied.newProject({ ip_allowlist: ['2001:db8::/32'] });
      const v6call = (ip: string) =>
        proxied.call('GET', `/v1/projects/${v6.id}`, { token: v6.key, headers: { 'x-forwarded-for': ip } });
      expect((await v6call('2001:db8::1')).status).toBe(200);
      expect((await v6call('2001:db9::1')).status).toBe(403);
    } finally {
      await proxied.close();
    }
  });
});

describe('errors', () => {
  it('renders unknown routes in the error body with the request id', async () => {
    const reply = await coffer.call('GET', '/v1/nothing-here', { headers: { 'x-request-id': 'trace-123' } });
    expect(reply.status).toBe(404);
    expect(reply.headers.get('x-request-id')).toBe('trace-123');
    expect(reply.body).toEqual({
      error: { code: 'NOT_FOUND', message: expect.any(String), request_id: 'trace-123' },
    });
  });

  it('gives every response an x-request-id', async () => {
    const reply = await coffer.call('GET', '/health');
    expect(reply.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('answers malformed JSON with 400 BAD_REQUEST', async () => {
    const reply = await coffer.call('POST', '/v1/organizations', { ...admin, body: '{"name": ' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toMatchObject({ code: 'BAD_REQUEST', request_id: expect.any(String) });
  });

  it('names the missing or mistyped field', async () => {
    const missing = await coffer.call('POST', '/v1/organizations', { ...admin, body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.error.details.field).toBe('name');
    const mistyped = await coffer.call('POST', '/v1/organizations', { ...admin, body: { name: 42 } });
    expect(mistyped.status).toBe(400);
    expect(mistyped.body.error.details.field).toBe('name');
  });

  it('answers JSON bodies over the limit with 413 REQUEST_TOO_LARGE', async () => {
    const reply = await coffer.call('POST', '/v1/organizations', {
      ...admin,
      body: { name: 'x'.repeat(2 * 1024 * 1024) },
    });
    expect(reply.status).toBe(413);
    expect(reply.body.error.code).toBe('REQUEST_TOO_LARGE');
  });

  it('hides internals of a 500', async () => {
    const failing = await startCoffer();
    try {
      await failing.services.db.query('SELECT 1'); // the shared database stays open
      failing.services.projects.listOrganizations = async () => {
        throw new Error('relation "secret_table" does not exist at Query.run (/src/x.ts:1:1)');
      };
      const reply = await failing.call('GET', '/v1/organizations', admin);
      expect(reply.status).toBe(500);
      expect(reply.body.error.code).toBe('INTERNAL');
      expect(JSON.stringify(reply.body)).not.toMatch(/secret_table|x\.ts|Query/);
    } finally {
      await failing.close();
    }
  });
});

describe('OpenAPI', () => {
  it('serves an OpenAPI 3.1 document generated from the routes, and a reference page', async () => {
    const doc = await coffer.call('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe('3.1.0');
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/v1/projects/{project_id}/files/upload',
        '/v1/projects/{project_id}/files',
        '/v1/projects/{project_id}/upload-tokens',
        '/health/ready',
      ]),
    );
    const docs = await fetch(`${coffer.url}/docs`);
    expect(docs.status).toBe(200);
    expect(await docs.text()).toContain('<html');
  });
});
