/**
 * The SDK's management plane against a real Coffer: whoami, organizations, projects and API keys
 * (the admin key), typed from the OpenAPI document.
 */
import { CofferError, createClient, type Identity, type Scope } from '@coffer/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, startCoffer, type TestCoffer } from '../support/coffer.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(async () => coffer?.close());

const clientWith = (apiKey: string) => createClient({ baseUrl: coffer.url, apiKey, retry: { attempts: 1 } });

describe('whoami', () => {
  it("says what the client's credential is", async () => {
    const project = await coffer.newProject(undefined, ['files:read']);
    const key: Identity = await clientWith(project.key).whoami();
    expect(key).toEqual({ kind: 'api_key', project_id: project.id, scopes: ['files:read'] });
    const admin = await clientWith(ADMIN_KEY).whoami();
    expect(admin).toMatchObject({ kind: 'admin', project_id: null });
    expect(admin.scopes).toContain('projects:update');
  });

  it('fails with the API’s error for a key it does not know', async () => {
    const error = await clientWith('coffer_live_unknown0000000000000000000000000')
      .whoami()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CofferError);
    expect(error).toMatchObject({
      status: 401,
      code: 'UNAUTHENTICATED',
      message: expect.stringMatching(/unknown/),
    });
  });
});

describe('organizations, projects and API keys (admin key)', () => {
  it('creates and lists each, and a new key works until it is revoked', async () => {
    const admin = clientWith(ADMIN_KEY);
    const organization = await admin.organizations.create({ name: 'SDK org' });
    expect(organization).toEqual({
      id: expect.stringMatching(/^org_/),
      name: 'SDK org',
      created_at: expect.any(String),
    });
    expect((await admin.organizations.list()).items.map((o) => o.id)).toContain(organization.id);

    const project = await admin.projects.create(organization.id, {
      name: 'SDK project',
      settings: { versioning_enabled: true },
    });
    expect(project).toMatchObject({ organization_id: organization.id, name: 'SDK project' });
    expect(project.settings.versioning_enabled).toBe(true);
    expect(await admin.projects.list(organization.id)).toEqual({ items: [project], total: 1 });

    const scopes: Scope[] = ['files:read', 'projects:read'];
    const created = await admin.apiKeys.create(project.id, { name: 'sdk', scopes });
    expect(created).toMatchObject({
      name: 'sdk',
      scopes,
      key: expect.stringMatching(/^coffer_live_/),
      revoked_at: null,
    });
    const listed = await admin.apiKeys.list(project.id);
    expect(listed.items).toEqual([{ ...created, key: undefined }].map(({ key: _, ...rest }) => rest));
    expect(JSON.stringify(listed)).not.toContain(created.key);

    const user = clientWith(created.key);
    expect((await user.projects.get(project.id)).id).toBe(project.id);
    await admin.apiKeys.revoke(project.id, created.id);
    await expect(user.projects.get(project.id)).rejects.toMatchObject({
      status: 401,
      code: 'UNAUTHENTICATED',
    });
    expect((await admin.apiKeys.list(project.id)).items[0]!.revoked_at).toEqual(expect.any(String));
  });

  it('refuses a project key with INSUFFICIENT_SCOPE, and an unknown organization with NOT_FOUND', async () => {
    const project = await coffer.newProject();
    const user = clientWith(project.key);
    await expect(user.organizations.list()).rejects.toMatchObject({
      status: 403,
      code: 'INSUFFICIENT_SCOPE',
    });
    await expect(user.apiKeys.list(project.id)).rejects.toMatchObject({
      status: 403,
      code: 'INSUFFICIENT_SCOPE',
    });
    await expect(clientWith(ADMIN_KEY).projects.list('org_01ARZ3NDEKTSV4RRFFQ69G5FAV')).rejects.toMatchObject(
      {
        status: 404,
        code: 'NOT_FOUND',
      },
    );
  });
});
