import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyWith, startCoffer, type TestCoffer } from '../support/coffer.ts';
import { initiate } from '../support/files.ts';
import { sleep } from '../support/processes.ts';
import { NON_PUBLIC_URLS } from '../support/receiver.ts';
import { EVENTS, expectError, register, webhooksSuite } from '../support/webhooks.ts';

// The webhooks of a project through the REST API: registered, listed, changed and deleted, by whom,
// and the URLs refused, at registration and when a delivery connects (SSRF protection).
const { coffer, receiver, newProject } = webhooksSuite();

const UNKNOWN_WEBHOOK = 'wh_01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe('webhook endpoints', () => {
  it('creates with the secret shown once, lists and gets without it, updates, and deletes', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint();
    const created = await project.call('POST', '/webhooks', {
      body: { url: endpoint.url, events: ['file.uploaded', 'file.ready'] },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^wh_[0-9A-Z]{26}$/),
      url: endpoint.url,
      events: ['file.uploaded', 'file.ready'],
      is_active: true,
      signing_secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{32,}$/),
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const { id, signing_secret: secret } = created.body;
    const stored = {
      id,
      url: endpoint.url,
      events: ['file.uploaded', 'file.ready'],
      is_active: true,
      created_at: created.body.created_at,
      updated_at: created.body.updated_at,
    };

    const list = await project.call('GET', '/webhooks');
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ items: [stored], total: 1 });
    expect(JSON.stringify(list.body)).not.toContain(secret);
    const one = await project.call('GET', `/webhooks/${id}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(stored);

    const inactive = await project.call('POST', '/webhooks', {
      body: { url: endpoint.url, events: ['file.deleted'], is_active: false },
    });
    expect(inactive.status).toBe(201);
    expect(inactive.body.is_active).toBe(false);
    expect(inactive.body.signing_secret).not.toBe(secret);

    await sleep(5);
    const other = receiver.endpoint();
    const updated = await project.call('PUT', `/webhooks/${id}`, {
      body: { url: other.url, events: ['file.deleted', 'file.deleted'], is_active: false },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({
      ...stored,
      url: other.url,
      events: ['file.deleted'],
      is_active: false,
      updated_at: expect.any(String),
    });
    expect(new Date(updated.body.updated_at).getTime()).toBeGreaterThan(
      new Date(stored.updated_at).getTime(),
    );
    // Fields left out keep their value.
    const partial = await project.call('PUT', `/webhooks/${id}`, { body: { is_active: true } });
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ url: other.url, events: ['file.deleted'], is_active: true });
    expect(partial.body).not.toHaveProperty('signing_secret');

    const listed = await project.call('GET', '/webhooks');
    expect(listed.body.total).toBe(2);
    expect(listed.body.items.map((w: any) => w.id).sort()).toEqual([id, inactive.body.id].sort());
    for (const item of listed.body.items) expect(item).not.toHaveProperty('signing_secret');

    const deleted = await project.call('DELETE', `/webhooks/${id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expect((await project.call('GET', '/webhooks')).body).toEqual({
      items: [expect.objectContaining({ id: inactive.body.id })],
      total: 1,
    });
    expectError(await project.call('GET', `/webhooks/${id}`), 404, 'webhook_not_found');
    expectError(
      await project.call('PUT', `/webhooks/${id}`, { body: { is_active: true } }),
      404,
      'webhook_not_found',
    );
    expectError(await project.call('DELETE', `/webhooks/${id}`), 404, 'webhook_not_found');
  });

  it.each([
    ['plain http', 'http://127.0.0.1/hook'],
    ['another scheme', 'ftp://127.0.0.1/hook'],
    ['no URL at all', 'not a url'],
    ['a relative path', '/hooks/1'],
    ['an empty string', ''],
    ['a scheme without host', 'https://'],
    ['credentials', 'https://user:secret@127.0.0.1/hook'],
    ['more than 2048 characters', `https://127.0.0.1/${'a'.repeat(2048)}`],
    ['a line break', 'https://127.0.0.1/hook\n'],
    ['a tab inside', 'https://127.0.0.1/ho\tok'],
    ['a DEL character', 'https://127.0.0.1/hook\u007f'],
  ])('refuses %s with 422 invalid_url, on create and on update', async (_what, url) => {
    const project = await newProject();
    const reply = await project.call('POST', '/webhooks', { body: { url, events: ['file.ready'] } });
    expectError(reply, 422, 'invalid_url');
    expect(reply.body.error.details).toEqual({ field: 'url' });
    const hook = await register(project, receiver.endpoint());
    expectError(await project.call('PUT', `/webhooks/${hook.id}`, { body: { url } }), 422, 'invalid_url');
    expect((await project.call('GET', '/webhooks')).body.total).toBe(1);
  });

  it('refuses unknown or no event names with 422 VALIDATION_ERROR', async () => {
    const project = await newProject();
    const url = receiver.endpoint().url;
    const unknown = await project.call('POST', '/webhooks', {
      body: { url, events: ['file.ready', 'file.exploded'] },
    });
    expectError(unknown, 422, 'VALIDATION_ERROR');
    expect(unknown.body.error.details).toMatchObject({ field: 'events', value: 'file.exploded' });
    expectError(
      await project.call('POST', '/webhooks', { body: { url, events: [] } }),
      422,
      'VALIDATION_ERROR',
    );
    expectError(
      await project.call('POST', '/webhooks', { body: { url, events: ['FILE.READY'] } }),
      422,
      'VALIDATION_ERROR',
    );
    const hook = await register(project, receiver.endpoint());
    expectError(
      await project.call('PUT', `/webhooks/${hook.id}`, { body: { events: ['file.created'] } }),
      422,
      'VALIDATION_ERROR',
    );
    expect((await project.call('GET', '/webhooks')).body.total).toBe(1);
    expect((await project.call('GET', `/webhooks/${hook.id}`)).body.events).toEqual(EVENTS);
  });

  it('answers 404 webhook_not_found for an unknown webhook or one of another project', async () => {
    const mine = await newProject();
    const theirs = await newProject();
    const hook = await register(theirs, receiver.endpoint());
    for (const id of [UNKNOWN_WEBHOOK, 'nope', hook.id]) {
      expectError(await mine.call('GET', `/webhooks/${id}`), 404, 'webhook_not_found');
      expectError(
        await mine.call('PUT', `/webhooks/${id}`, { body: { is_active: false } }),
        404,
        'webhook_not_found',
      );
      expectError(await mine.call('DELETE', `/webhooks/${id}`), 404, 'webhook_not_found');
      expectError(await mine.call('GET', `/webhooks/${id}/deliveries`), 404, 'webhook_not_found');
      expectError(
        await mine.call('POST', `/webhooks/${id}/deliveries/dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV/redeliver`),
        404,
        'webhook_not_found',
      );
    }
    // Nothing happened to the other project's webhook.
    expect((await theirs.call('GET', `/webhooks/${hook.id}`)).body.is_active).toBe(true);
    // A key of one project on another project's path: 404 NOT_FOUND, never 403.
    expectError(
      await coffer.call('GET', `/v1/projects/${theirs.id}/webhooks`, { token: mine.key }),
      404,
      'NOT_FOUND',
    );
  });

  it('requires projects:read to list and projects:update to change, and refuses upload tokens', async () => {
    const project = await newProject();
    const hook = await register(project, receiver.endpoint());
    const body = { url: receiver.endpoint().url, events: ['file.ready'] };
    const paths = {
      list: ['GET', '/webhooks'],
      get: ['GET', `/webhooks/${hook.id}`],
      deliveries: ['GET', `/webhooks/${hook.id}/deliveries`],
      create: ['POST', '/webhooks'],
      update: ['PUT', `/webhooks/${hook.id}`],
      redeliver: ['POST', `/webhooks/${hook.id}/deliveries/dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV/redeliver`],
      remove: ['DELETE', `/webhooks/${hook.id}`],
    } as const;
    const call = (what: keyof typeof paths, token: string) =>
      project.call(paths[what][0], paths[what][1], {
        token,
        ...(what === 'create' || what === 'update' ? { body } : {}),
      });

    const filesOnly = (await keyWith(coffer, project, ['files:read', 'files:upload', 'upload_tokens:create']))
      .key;
    for (const what of Object.keys(paths) as (keyof typeof paths)[]) {
      expectError(await call(what, filesOnly), 403, 'INSUFFICIENT_SCOPE');
    }

    const reader = (await keyWith(coffer, project, ['projects:read'])).key;
    expect((await call('list', reader)).status).toBe(200);
    expect((await call('get', reader)).status).toBe(200);
    expect((await call('deliveries', reader)).status).toBe(200);
    for (const what of ['create', 'update', 'redeliver', 'remove'] as const) {
      expectError(await call(what, reader), 403, 'INSUFFICIENT_SCOPE');
    }

    const writer = (await keyWith(coffer, project, ['projects:update'])).key;
    expectError(await call('list', writer), 403, 'INSUFFICIENT_SCOPE');
    expect((await call('create', writer)).status).toBe(201);
    expect((await call('update', writer)).status).toBe(200);

    const token = (await project.call('POST', '/upload-tokens', { body: {} })).body.token as string;
    expect(token).toMatch(/^coffer_upload_token_/);
    for (const what of Object.keys(paths) as (keyof typeof paths)[]) {
      expectError(await call(what, token), 403, 'INSUFFICIENT_SCOPE');
    }
    expect((await call('remove', writer)).status).toBe(204);
  });
});

describe('SSRF protection (private networks not allowed)', () => {
  let strict: TestCoffer;
  beforeAll(async () => {
    strict = await startCoffer({}, { webhookCa: receiver.ca });
  });
  afterAll(() => strict?.close());

  it.each(NON_PUBLIC_URLS)('refuses %s with 422 invalid_url', async (url) => {
    const project = await newProject(undefined, strict);
    expectError(
      await project.call('POST', '/webhooks', { body: { url, events: ['file.ready'] } }),
      422,
      'invalid_url',
    );
    const hook = await project.call('POST', '/webhooks', {
      body: { url: 'https://93.184.215.14/hook', events: ['file.ready'] },
    });
    expect(hook.status).toBe(201);
    expectError(
      await project.call('PUT', `/webhooks/${hook.body.id}`, { body: { url } }),
      422,
      'invalid_url',
    );
    expect((await project.call('GET', `/webhooks/${hook.body.id}`)).body.url).toBe(
      'https://93.184.215.14/hook',
    );
    expect((await project.call('DELETE', `/webhooks/${hook.body.id}`)).status).toBe(204);
  });

  it.each([
    ['a name that now resolves to loopback (DNS rebinding)', (port: number) => `https://localhost:${port}`],
    ['an address literal that got past registration', (port: number) => `https://127.0.0.1:${port}`],
  ])('refuses at connect time %s', async (_what, origin) => {
    const project = await newProject(undefined, strict);
    const endpoint = receiver.endpoint();
    const created = await project.call('POST', '/webhooks', {
      body: { url: 'https://93.184.215.14/hook', events: ['file.uploaded'] },
    });
    expect(created.status).toBe(201);
    // What registration checked no longer holds when the delivery connects.
    await strict.services.db.query('UPDATE webhooks SET url = $2 WHERE id = $1', [
      created.body.id,
      `${origin(receiver.port)}${endpoint.path}`,
    ]);
    await initiate(project);
    await step();
    const [failed] = (await project.call('GET', `/webhooks/${created.body.id}/deliveries`)).body.items;
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, last_response_status: null });
    expect(failed.last_error).toMatch(
      /^EBLOCKEDADDRESS: .*(is not a public|resolves to the non-public) address/,
    );
    expect(endpoint.requests).toHaveLength(0);
    expect((await project.call('DELETE', `/webhooks/${created.body.id}`)).status).toBe(204);

    async function step() {
      const d = strict.services.dispatcher;
      const deadline = Date.now() + 5000;
      while ((await d.runOnce()) === 0) {
        if (Date.now() > deadline) throw new Error('no delivery became due');
        await sleep(10);
      }
      await d.settle();
    }
  });
});
