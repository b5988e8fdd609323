import pino from 'pino';
import { ulid } from 'ulid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { CLI_AUDIT, createAuditService } from '../../src/modules/audit/service.ts';
import { SCOPES } from '../../src/modules/projects/schemas.ts';
import {
  ADMIN_KEY,
  type CallOptions,
  keyWith,
  startCoffer,
  type TestCoffer,
  type TestProject,
} from '../support/coffer.ts';
import { initiate, put, upload } from '../support/files.ts';

// Webhook targets on loopback: nothing is delivered (no workers run), the URL only has to be accepted.
const ENV = { COFFER_WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
const HOOK_URL = 'https://127.0.0.1:9/hook';
const admin = { token: ADMIN_KEY };

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer(ENV);
});
afterAll(() => coffer?.close());

type Entry = Record<string, any>;
let requests = 0;

/** A request id of its own for each call, so that an entry can be matched to the request that made it. */
function traced(options: CallOptions = {}): CallOptions & { requestId: string } {
  const requestId = `audit-test-${process.pid}-${++requests}`;
  return { ...options, headers: { ...options.headers, 'x-request-id': requestId }, requestId };
}

async function logOf(project: TestProject, query = '', token = ADMIN_KEY) {
  const reply = await coffer.call('GET', `/v1/projects/${project.id}/audit-log${query}`, { token });
  expect(reply.status).toBe(200);
  return reply.body as { items: Entry[]; limit: number; has_more: boolean; next_cursor: string | null };
}

/** The project's entries of one action: exactly one is expected. */
async function onlyEntry(project: TestProject, action: string): Promise<Entry> {
  const { items } = await logOf(project, `?action=${action}`);
  expect(items.map((entry) => entry.action)).toEqual([action]);
  return items[0]!;
}

/** A project with an API key of every scope whose id is known, for the entries' actor_id. */
async function projectWithKey(settings?: Parameters<TestCoffer['newProject']>[0]) {
  const project = await coffer.newProject(settings);
  const key = await keyWith(coffer, project, SCOPES);
  const as = (method: string, path: string, options: CallOptions = {}) =>
    project.call(method, path, { ...options, token: options.token ?? key.key });
  return { project, key, as };
}

const byApiKey = (keyId: string, requestId: string) => ({
  actor_type: 'api_key',
  actor_id: keyId,
  client_ip: '127.0.0.1',
  request_id: requestId,
});

describe('what the audit log records', () => {
  it('records organization and project creation, with the admin as actor, and lists them by organization', async () => {
    const orgCall = traced({ ...admin, body: { name: 'Audited' } });
    const org = await coffer.call('POST', '/v1/organizations', orgCall);
    expect(org.status).toBe(201);
    const projectCall = traced({
      ...admin,
      body: { name: 'Audited project', settings: { versioning_enabled: true } },
    });
    const project = await coffer.call('POST', `/v1/organizations/${org.body.id}/projects`, projectCall);
    expect(project.status).toBe(201);

    const orgLog = await coffer.call('GET', `/v1/organizations/${org.body.id}/audit-log`, admin);
    expect(orgLog.status).toBe(200);
    const [projectEntry, orgEntry] = orgLog.body.items;
    expect(orgLog.body.items).toHaveLength(2);
    expect(orgEntry).toEqual({
      id: expect.stringMatching(/^aud_[0-9A-Z]{26}$/),
      created_at: expect.any(String),
      organization_id: org.body.id,
      project_id: null,
      action: 'organization.create',
      actor_type: 'admin',
      actor_id: null,
      client_ip: '127.0.0.1',
      request_id: orgCall.requestId,
      targets: { organization_id: org.body.id },
      before: null,
      after: { name: 'Audited' },
    });
    expect(projectEntry).toMatchObject({
      organization_id: org.body.id,
      project_id: project.body.id,
      action: 'project.create',
      actor_type: 'admin',
      request_id: projectCall.requestId,
      targets: { project_id: project.body.id },
      before: null,
      after: { name: 'Audited project', settings: project.body.settings },
    });
    // The project's own log has its creation, not the organization's.
    const own = await coffer.call('GET', `/v1/projects/${project.body.id}/audit-log`, admin);
    expect(own.body.items.map((entry: Entry) => entry.action)).toEqual(['project.create']);

    const unknown = await coffer.call(
      'GET',
      '/v1/organizations/org_01ARZ3NDEKTSV4RRFFQ69G5FAV/audit-log',
      admin,
    );
    expect(unknown.status).toBe(404);
  });

  it('records a settings change with only what changed, before and after', async () => {
    const { project, key, as } = await projectWithKey();
    const call = traced({ body: { settings: { max_file_size_bytes: 1000, require_signed_urls: false } } });
    expect((await as('PATCH', '', call)).status).toBe(200);
    expect(await onlyEntry(project, 'project.update')).toMatchObject({
      ...byApiKey(key.id, call.requestId),
      targets: { project_id: project.id },
      before: { settings: { max_file_size_bytes: null } },
      after: { settings: { max_file_size_bytes: 1000 } },
    });

    const renamed = traced({ body: { name: 'Renamed' } });
    expect((await as('PATCH', '', renamed)).status).toBe(200);
    const [latest] = (await logOf(project, '?action=project.update')).items;
    expect(latest).toMatchObject({ request_id: renamed.requestId, before: { name: 'Test project' } });
    expect(latest!.after).toEqual({ name: 'Renamed' });
  });

  it('records API keys created and revoked', async () => {
    const project = await coffer.newProject();
    const created = traced({ ...admin, body: { name: 'ci', scopes: ['files:read'] } });
    const key = await coffer.call('POST', `/v1/projects/${project.id}/api-keys`, created);
    // The newest of two: the test project came with a key of its own.
    const keys = (await logOf(project, '?action=api_key.create')).items;
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatchObject({
      actor_type: 'admin',
      actor_id: null,
      request_id: created.requestId,
      targets: { api_key_id: key.body.id },
      after: { name: 'ci', scopes: ['files:read'] },
    });
    const revoked = traced(admin);
    expect(
      (await coffer.call('DELETE', `/v1/projects/${project.id}/api-keys/${key.body.id}`, revoked)).status,
    ).toBe(204);
    expect(await onlyEntry(project, 'api_key.revoke')).toMatchObject({
      request_id: revoked.requestId,
      targets: { api_key_id: key.body.id },
    });
  });

  it('records webhooks created, updated, redelivered and deleted', async () => {
    const { project, key, as } = await projectWithKey();
    const created = traced({ body: { url: HOOK_URL, events: ['file.uploaded'] } });
    const hook = (await as('POST', '/webhooks', created)).body;
    expect(await onlyEntry(project, 'webhook.create')).toMatchObject({
      ...byApiKey(key.id, created.requestId),
      targets: { webhook_id: hook.id },
      before: null,
      after: { url: HOOK_URL, events: ['file.uploaded'], is_active: true },
    });

    const updated = traced({ body: { is_active: false, events: ['file.uploaded'] } });
    expect((await as('PUT', `/webhooks/${hook.id}`, updated)).status).toBe(200);
    expect(await onlyEntry(project, 'webhook.update')).toMatchObject({
      ...byApiKey(key.id, updated.requestId),
      targets: { webhook_id: hook.id },
      before: { is_active: true },
      after: { is_active: false },
    });

    // A delivery that has ended (dead) may be sent again.
    await as('PUT', `/webhooks/${hook.id}`, { body: { is_active: true } });
    await initiate(project);
    const [delivery] = (await as('GET', `/webhooks/${hook.id}/deliveries`)).body.items;
    await coffer.services.db.query("UPDATE deliveries SET status = 'dead' WHERE id = $1", [delivery.id]);
    const redelivered = traced();
    expect(
      (await as('POST', `/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`, redelivered)).status,
    ).toBe(202);
    expect(await onlyEntry(project, 'webhook.redeliver')).toMatchObject({
      request_id: redelivered.requestId,
      targets: { webhook_id: hook.id, delivery_id: delivery.id },
    });

    const deleted = traced();
    expect((await as('DELETE', `/webhooks/${hook.id}`, deleted)).status).toBe(204);
    expect(await onlyEntry(project, 'webhook.delete')).toMatchObject({
      ...byApiKey(key.id, deleted.requestId),
      targets: { webhook_id: hook.id },
      before: { url: HOOK_URL, events: ['file.uploaded'], is_active: true },
      after: null,
    });
    // A second delete finds nothing and records nothing.
    expect((await as('DELETE', `/webhooks/${hook.id}`)).status).toBe(404);
    await onlyEntry(project, 'webhook.delete');
  });

  it('records upload tokens created, with their constraints', async () => {
    const { project, key, as } = await projectWithKey();
    const call = traced({ body: { max_files: 3, allowed_mime_types: ['image/*'], owner_user_id: 'u1' } });
    const token = await as('POST', '/upload-tokens', call);
    expect(token.status).toBe(201);
    const entry = await onlyEntry(project, 'upload_token.create');
    expect(entry).toMatchObject({
      ...byApiKey(key.id, call.requestId),
      targets: { upload_token_id: expect.stringMatching(/^tok_/) },
      after: {
        max_files: 3,
        allowed_mime_types: ['image/*'],
        max_size: 104_857_600,
        owner_user_id: 'u1',
        owner_org_id: null,
        folder_id: null,
        expires_at: token.body.expires_at,
      },
    });
    // The entry's token id is the one the token acts as.
    const file = await initiate(project, {
      token: token.body.token,
      filename: 'a.png',
      content_type: 'image/png',
    });
    const [row] = await coffer.services.db.query<{ upload_token_id: string }>(
      'SELECT upload_token_id FROM files WHERE id = $1',
      [file.file_id],
    );
    expect(entry.targets.upload_token_id).toBe(row!.upload_token_id);
  });

  it('records metadata schema changes', async () => {
    const { project, key, as } = await projectWithKey();
    const first = { type: 'object', properties: { album: { type: 'string' } } };
    const set = traced({ body: { schema: first, is_active: false } });
    expect((await as('PUT', '/metadata-schema', set)).status).toBe(200);
    expect(await onlyEntry(project, 'metadata_schema.set')).toMatchObject({
      ...byApiKey(key.id, set.requestId),
      targets: { project_id: project.id },
      before: null,
      after: { schema: first, is_active: false },
    });

    const changed = traced({ body: { schema: first, is_active: true } });
    await as('PUT', '/metadata-schema', changed);
    const [latest] = (await logOf(project, '?action=metadata_schema.set')).items;
    expect(latest).toMatchObject({ request_id: changed.requestId });
    expect([latest!.before, latest!.after]).toEqual([{ is_active: false }, { is_active: true }]);

    const removed = traced();
    expect((await as('DELETE', '/metadata-schema', removed)).status).toBe(204);
    expect(await onlyEntry(project, 'metadata_schema.delete')).toMatchObject({
      request_id: removed.requestId,
      before: { schema: first, is_active: true },
      after: null,
    });
  });

  it('records legal holds, deletes and restores of files', async () => {
    const { project, key, as } = await projectWithKey({ versioning_enabled: true });
    const file = (await upload(project, { bytes: 'one' })).body;
    const next = await as('POST', `/files/${file.id}/versions`, { body: { size_bytes: 4 } });
    await put(next.body.upload_url, 'two!');
    await as('POST', `/files/${file.id}/versions/${next.body.version_id}/confirm`);
    const [, v1] = (await as('GET', `/files/${file.id}/versions`)).body.items;

    const restored = traced();
    expect((await as('POST', `/files/${file.id}/versions/${v1.id}/restore`, restored)).status).toBe(200);
    expect(await onlyEntry(project, 'file.restore')).toMatchObject({
      ...byApiKey(key.id, restored.requestId),
      targets: { file_id: file.id, version_id: v1.id },
      before: { size_bytes: 4 },
      after: { size_bytes: 3 },
    });

    const held = traced({ body: { reason: 'litigation 42' } });
    expect((await as('PUT', `/files/${file.id}/legal-hold`, held)).status).toBe(200);
    expect(await onlyEntry(project, 'file.legal_hold.place')).toMatchObject({
      ...byApiKey(key.id, held.requestId),
      targets: { file_id: file.id },
      before: { legal_hold: false },
      after: { legal_hold: true, legal_hold_reason: 'litigation 42' },
    });
    // Refused while held: nothing recorded.
    expect((await as('DELETE', `/files/${file.id}`)).status).toBe(409);
    expect((await logOf(project, '?action=file.delete')).items).toEqual([]);

    const released = traced();
    expect((await as('DELETE', `/files/${file.id}/legal-hold`, released)).status).toBe(200);
    expect(await onlyEntry(project, 'file.legal_hold.release')).toMatchObject({
      request_id: released.requestId,
      before: { legal_hold: true },
      after: { legal_hold: false, legal_hold_reason: null },
    });

    const deleted = traced();
    expect((await as('DELETE', `/files/${file.id}`, deleted)).status).toBe(200);
    expect(await onlyEntry(project, 'file.delete')).toMatchObject({
      ...byApiKey(key.id, deleted.requestId),
      project_id: project.id,
      organization_id: project.organizationId,
      targets: { file_id: file.id },
    });
  });

  it('records a rescan of a file the scanner could not check', async () => {
    const { project, key, as } = await projectWithKey();
    const file = (await upload(project)).body;
    // As the pipeline leaves a file once the scanner stayed unavailable past the retry window.
    await coffer.services.db.query(
      "UPDATE files SET status = 'failed', failure_reason = 'scan_unavailable: connection refused' WHERE id = $1",
      [file.id],
    );
    const rescanned = traced();
    expect((await as('POST', `/files/${file.id}/rescan`, rescanned)).status).toBe(202);
    expect(await onlyEntry(project, 'file.rescan')).toMatchObject({
      ...byApiKey(key.id, rescanned.requestId),
      targets: { file_id: file.id },
      before: { status: 'failed', failure_reason: 'scan_unavailable: connection refused' },
      after: { status: 'processing', failure_reason: null },
    });
    // Refused (the file is processing now): nothing more recorded.
    expect((await as('POST', `/files/${file.id}/rescan`)).status).toBe(409);
    await onlyEntry(project, 'file.rescan');
  });

  it('takes the client IP as the IP allowlist does, from X-Forwarded-For behind a trusted proxy', async () => {
    const proxied = await startCoffer({ ...ENV, COFFER_TRUST_PROXY: 'true' });
    try {
      const org = await proxied.call('POST', '/v1/organizations', {
        ...admin,
        body: { name: 'Proxied' },
        headers: { 'x-forwarded-for': '203.0.113.7' },
      });
      const log = await proxied.call('GET', `/v1/organizations/${org.body.id}/audit-log`, admin);
      expect(log.body.items[0]).toMatchObject({ action: 'organization.create', client_ip: '203.0.113.7' });
    } finally {
      await proxied.close();
    }
  });

  it('records what coffer admin bootstrap creates as the CLI, without IP or request', async () => {
    const { projects } = coffer.services;
    const org = await projects.createOrganization('From the console', CLI_AUDIT);
    const log = await coffer.call('GET', `/v1/organizations/${org.id}/audit-log`, admin);
    expect(log.body.items).toEqual([
      expect.objectContaining({
        action: 'organization.create',
        actor_type: 'cli',
        actor_id: null,
        client_ip: null,
        request_id: null,
      }),
    ]);
  });

  it('records nothing for reads', async () => {
    const { project, as } = await projectWithKey();
    const before = (await logOf(project)).items.length;
    await as('GET', '');
    await as('GET', '/webhooks');
    await as('GET', '/files');
    expect((await logOf(project)).items).toHaveLength(before);
  });
});

describe('secrets', () => {
  it('never records a key, token or signing secret, and masks one typed into a recorded field', async () => {
    const { project, key, as } = await projectWithKey();
    const hook = (await as('POST', '/webhooks', { body: { url: HOOK_URL, events: ['file.ready'] } })).body;
    await as('PUT', `/webhooks/${hook.id}`, { body: { url: `${HOOK_URL}2` } });
    const token = (await as('POST', '/upload-tokens', { body: {} })).body.token as string;
    const file = (await upload(project)).body;
    await as('PUT', `/files/${file.id}/legal-hold`, { body: { reason: `pasted by mistake: ${key.key}` } });
    await as('PATCH', '', { body: { name: `named ${ADMIN_KEY}` } });
    const secrets = [key.key, hook.signing_secret, token, ADMIN_KEY, project.key];
    expect(secrets.every((secret) => typeof secret === 'string' && secret.length > 20)).toBe(true);

    const answered = JSON.stringify((await logOf(project)).items);
    const stored = JSON.stringify(
      await coffer.services.db.query('SELECT * FROM audit_log WHERE project_id = $1', [project.id]),
    );
    for (const text of [answered, stored]) {
      expect(text).toContain('webhook.create');
      for (const secret of secrets) {
        // Neither whole nor its random part (the part after the prefix, which may itself hold '_').
        expect(text).not.toContain(secret);
        expect(text).not.toContain(secret.replace(/^(coffer_(live|admin|upload_token)|whsec)_/, ''));
      }
    }
    expect(await onlyEntry(project, 'file.legal_hold.place')).toMatchObject({
      after: { legal_hold_reason: 'pasted by mistake: [secret]' },
    });
  });
});

describe('GET /v1/projects/{project_id}/audit-log', () => {
  it('needs audit:read or the admin key', async () => {
    const project = await coffer.newProject();
    const withoutScope = await keyWith(
      coffer,
      project,
      SCOPES.filter((scope) => scope !== 'audit:read'),
    );
    const reader = await keyWith(coffer, project, ['audit:read']);
    const refused = await project.call('GET', '/audit-log', { token: withoutScope.key });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({
      code: 'INSUFFICIENT_SCOPE',
      details: { required_scope: 'audit:read' },
    });
    expect((await project.call('GET', '/audit-log', { token: reader.key })).status).toBe(200);
    expect((await project.call('GET', '/audit-log', admin)).status).toBe(200);

    const token = (await project.call('POST', '/upload-tokens', { body: {} })).body.token;
    expect((await project.call('GET', '/audit-log', { token })).status).toBe(403);
    // Another project's key learns nothing about this one.
    const other = await coffer.newProject();
    expect((await project.call('GET', '/audit-log', { token: other.key })).status).toBe(404);
    // The organization's log is the admin's only.
    const orgLog = await coffer.call('GET', `/v1/organizations/${project.organizationId}/audit-log`, {
      token: reader.key,
    });
    expect(orgLog.status).toBe(403);
  });

  it('filters by action, actor and time, and pages with a cursor, newest first', async () => {
    const { project, key, as } = await projectWithKey();
    for (let i = 0; i < 3; i++)
      await as('POST', '/webhooks', { body: { url: `${HOOK_URL}/${i}`, events: ['file.ready'] } });
    await as('PATCH', '', { body: { name: 'one' } });
    await coffer.call('PATCH', `/v1/projects/${project.id}`, { ...admin, body: { name: 'two' } });

    const all = (await logOf(project, '?limit=200')).items;
    // project.create, api_key.create x2 (the helper's key and this one), 3 webhooks, 2 updates.
    expect(all).toHaveLength(8);
    expect(all.map((entry) => entry.id)).toEqual(
      all
        .map((entry) => entry.id)
        .sort()
        .reverse(),
    );

    const pages: Entry[] = [];
    let cursor: string | null = null;
    let calls = 0;
    do {
      const page: Awaited<ReturnType<typeof logOf>> = await logOf(
        project,
        `?limit=3${cursor ? `&cursor=${cursor}` : ''}`,
      );
      expect(page.limit).toBe(3);
      expect(page.items.length).toBeLessThanOrEqual(3);
      pages.push(...page.items);
      expect(page.next_cursor).toBe(page.has_more ? page.items.at(-1)!.id : null);
      cursor = page.next_cursor;
      calls++;
    } while (cursor);
    expect(calls).toBe(3);
    expect(pages).toEqual(all);

    const hooks = (await logOf(project, '?action=webhook.create')).items;
    expect(hooks.map((entry) => entry.after.url)).toEqual([2, 1, 0].map((i) => `${HOOK_URL}/${i}`));

    const byKey = (await logOf(project, `?actor_type=api_key&actor_id=${key.id}`)).items;
    expect(byKey.map((entry) => entry.action)).toEqual([
      'project.update',
      'webhook.create',
      'webhook.create',
      'webhook.create',
    ]);
    const byAdmin = (await logOf(project, '?actor_type=admin')).items;
    expect(byAdmin.map((entry) => entry.action)).toEqual([
      'project.update',
      'api_key.create',
      'api_key.create',
      'project.create',
    ]);
    expect((await logOf(project, '?actor_id=key_01ARZ3NDEKTSV4RRFFQ69G5FAV')).items).toEqual([]);

    // A time range includes its bounds; a date alone as `to` covers the whole day.
    const [from, to] = [all[5]!.created_at, all[2]!.created_at];
    const ranged = (await logOf(project, `?from=${from}&to=${to}&limit=200`)).items;
    expect(ranged).toEqual(all.filter((entry) => entry.created_at >= from && entry.created_at <= to));
    expect(ranged.length).toBeGreaterThanOrEqual(4);
    expect((await logOf(project, `?from=${new Date(Date.now() + 60_000).toISOString()}`)).items).toEqual([]);
    const day = all[0]!.created_at.slice(0, 10);
    expect((await logOf(project, `?from=${day}&to=${day}&limit=200`)).items).toEqual(
      all.filter((entry) => entry.created_at.startsWith(day)),
    );
    const combined = (await logOf(project, `?action=webhook.create&from=${from}&to=${to}`)).items;
    expect(combined).toEqual(ranged.filter((entry) => entry.action === 'webhook.create'));
  });

  it('refuses what it cannot read', async () => {
    const project = await coffer.newProject();
    for (const [query, field] of [
      ['?cursor=file_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'cursor'],
      ['?from=yesterday', 'from'],
      ['?to=2026-02-31', 'to'],
      ['?action=file.explode', 'action'],
      ['?actor_type=robot', 'actor_type'],
    ]) {
      const reply = await project.call('GET', `/audit-log${query}`, admin);
      expect(reply.status, query).toBe(400);
      expect(reply.body.error).toMatchObject({ code: 'BAD_REQUEST', details: { field } });
    }
    const tooMany = await project.call('GET', '/audit-log?limit=201', admin);
    expect(tooMany.status).toBe(422);
  });
});

describe('the transaction of the change', () => {
  /** Runs `work` with a PostgreSQL trigger that fails statements matching `when` on `table`. */
  async function withFailure(
    table: string,
    when: string,
    options: { deferred: boolean },
    work: () => Promise<void>,
  ): Promise<void> {
    const { db } = coffer.services;
    const name = `audit_test_fail_${table}`;
    await db.exec(`
      CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused for the test'; END $$;
      ${
        options.deferred
          ? `CREATE CONSTRAINT TRIGGER ${name} AFTER INSERT OR UPDATE ON ${table} DEFERRABLE INITIALLY DEFERRED`
          : `CREATE TRIGGER ${name} BEFORE INSERT OR UPDATE ON ${table}`
      } FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${name}();`);
    try {
      await work();
    } finally {
      await db.exec(`DROP TRIGGER ${name} ON ${table}; DROP FUNCTION ${name}();`);
    }
  }

  it('leaves no entry when the change fails, even at commit after the entry was written', async () => {
    const { project, as } = await projectWithKey();
    const hook = (await as('POST', '/webhooks', { body: { url: HOOK_URL, events: ['file.ready'] } })).body;
    // The webhook's update fails only when the transaction commits: the entry was written by then.
    await withFailure(
      'webhooks',
      `NEW.id = '${hook.id}' AND NEW.deleted_at IS NOT NULL`,
      { deferred: true },
      async () => {
        expect((await as('DELETE', `/webhooks/${hook.id}`)).status).toBe(500);
      },
    );
    expect((await as('GET', `/webhooks/${hook.id}`)).status).toBe(200);
    expect((await logOf(project, '?action=webhook.delete')).items).toEqual([]);
  });

  it('makes no change when its entry cannot be written', async () => {
    const { project, as } = await projectWithKey();
    const file = (await upload(project)).body;
    await withFailure(
      'audit_log',
      `NEW.targets->>'file_id' = '${file.id}'`,
      { deferred: false },
      async () => {
        expect((await as('DELETE', `/files/${file.id}`)).status).toBe(500);
      },
    );
    expect((await as('GET', `/files/${file.id}`)).body.deleted_at).toBeNull();
    expect((await logOf(project, '?action=file.delete')).items).toEqual([]);
  });
});

describe('retention', () => {
  const DAY_MS = 86_400_000;

  /** Moves an entry `days` into the past (its id carries its time, as new entries' ids do). */
  async function age(entry: Entry, days: number): Promise<string> {
    const at = Date.now() - days * DAY_MS;
    const id = `aud_${ulid(at)}`;
    await coffer.services.db.query('UPDATE audit_log SET id = $2, created_at = $3 WHERE id = $1', [
      entry.id,
      id,
      new Date(at),
    ]);
    return id;
  }

  it('is 365 days unless COFFER_AUDIT_RETENTION_DAYS says otherwise', () => {
    expect(loadConfig({}).auditRetentionDays).toBe(365);
    expect(loadConfig({ COFFER_AUDIT_RETENTION_DAYS: '30' }).auditRetentionDays).toBe(30);
    for (const bad of ['0', '-1', '1.5', 'forever'])
      expect(() => loadConfig({ COFFER_AUDIT_RETENTION_DAYS: bad })).toThrow(ConfigError);
  });

  it('prunes the entries older than the retention, and only those', async () => {
    const { project, as } = await projectWithKey();
    for (let i = 0; i < 3; i++)
      await as('POST', '/webhooks', { body: { url: `${HOOK_URL}/${i}`, events: ['file.ready'] } });
    const [recent, month, year] = (await logOf(project, '?action=webhook.create')).items;
    const monthOld = await age(month!, 300);
    const yearOld = await age(year!, 400);
    expect(
      (await logOf(project, `?to=${new Date(Date.now() - 200 * DAY_MS).toISOString()}`)).items.map(
        (e) => e.id,
      ),
    ).toEqual([monthOld, yearOld]);

    // The server's own prune: 365 days.
    await coffer.services.audit.prune();
    let ids = (await logOf(project, '?action=webhook.create')).items.map((entry) => entry.id);
    expect(ids).toEqual([recent!.id, monthOld]);

    // A shorter retention reaches further.
    const shorter = createAuditService({
      db: coffer.services.db,
      retentionDays: 30,
      logger: pino({ level: 'silent' }),
    });
    await shorter.prune();
    ids = (await logOf(project, '?action=webhook.create')).items.map((entry) => entry.id);
    expect(ids).toEqual([recent!.id]);
    expect((await logOf(project)).items.length).toBeGreaterThan(1);
  });
});
