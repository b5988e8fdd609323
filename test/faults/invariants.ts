import type { Dirent } from 'node:fs';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { expect } from 'vitest';
import { EVENT_TYPES } from '../../src/modules/events/types.ts';
import { SCOPES } from '../../src/modules/projects/schemas.ts';
import { expectStatus, type Reply, request } from '../support/coffer.ts';
import { sha256 } from '../support/files.ts';
import { until } from '../support/processes.ts';
import type { Endpoint, Received } from '../support/receiver.ts';

/**
 * What every fault scenario must leave behind, checked through the API, the webhook receiver and the
 * store's folder: no file `ready` with bytes other than those uploaded, every event delivered at least
 * once under one event id, and nothing on disk that no file refers to.
 */

/** A project's API as one key sees it, on whichever process serves it now. */
export interface ProjectApi {
  <T = any>(method: string, path: string, body?: unknown): Promise<Reply<T>>;
  projectId: string;
}

export function projectApi(baseUrl: () => string, projectId: string, key: string): ProjectApi {
  const api = (<T = any>(method: string, path: string, body?: unknown) =>
    request<T>(`${baseUrl()}/v1/projects/${projectId}${path}`, method, { token: key, body })) as ProjectApi;
  api.projectId = projectId;
  return api;
}

/** A project (with `settings`), an API key with every scope, and a webhook on `endpoint` for every event. */
export async function newProject(
  baseUrl: () => string,
  adminKey: string,
  endpoint: Endpoint,
  settings: Record<string, unknown> = {},
): Promise<{ api: ProjectApi; webhookId: string }> {
  const admin = (path: string, body: unknown) =>
    request(`${baseUrl()}/v1${path}`, 'POST', { token: adminKey, body });
  const org = await admin('/organizations', { name: 'Faults' });
  expectStatus(org, 201);
  const project = await admin(`/organizations/${org.body.id}/projects`, { name: 'Faults', settings });
  expectStatus(project, 201);
  const key = await admin(`/projects/${project.body.id}/api-keys`, { name: 'faults', scopes: SCOPES });
  expectStatus(key, 201);
  const api = projectApi(baseUrl, project.body.id, key.body.key);
  const webhook = await api('POST', '/webhooks', { url: endpoint.url, events: [...EVENT_TYPES] });
  expectStatus(webhook, 201);
  endpoint.secret = webhook.body.signing_secret;
  return { api, webhookId: webhook.body.id };
}

export interface FileObject {
  id: string;
  status: string;
  size_bytes: number;
  checksum_sha256: string | null;
  failure_reason: string | null;
}

export async function allFiles(api: ProjectApi): Promise<FileObject[]> {
  const files: FileObject[] = [];
  let cursor: string | null = null;
  do {
    const page: Reply = await api('GET', `/files?limit=200${cursor ? `&cursor=${cursor}` : ''}`);
    expectStatus(page, 200);
    files.push(...page.body.items);
    cursor = page.body.next_cursor;
  } while (cursor);
  return files;
}

/** The bytes behind a download endpoint (`…/download`), and the store key its URL names. */
export async function downloadOf(api: ProjectApi, path: string): Promise<{ bytes: Buffer; key: string }> {
  const link = await api('GET', path);
  expectStatus(link, 200);
  const response = await fetch(link.body.url);
  expect(response.status).toBe(200);
  const { pathname } = new URL(link.body.url);
  return {
    bytes: Buffer.from(await response.arrayBuffer()),
    key: decodeURIComponent(pathname.slice('/objects/'.length)),
  };
}

/**
 * Every `ready` file is one of `uploaded`, and serves exactly the bytes uploaded for it (its checksum
 * agrees). Returns the files by id.
 */
export async function expectReadyBytes(
  api: ProjectApi,
  uploaded: Map<string, Buffer>,
): Promise<Map<string, FileObject>> {
  const files = await allFiles(api);
  for (const file of files.filter((f) => f.status === 'ready')) {
    const expected = uploaded.get(file.id);
    expect(expected, `ready file ${file.id} was never uploaded`).toBeDefined();
    const { bytes } = await downloadOf(api, `/files/${file.id}/download`);
    expect(sha256(bytes), `bytes of ${file.id}`).toBe(sha256(expected!));
    expect(file.size_bytes).toBe(expected!.length);
    if (file.checksum_sha256 !== null) expect(file.checksum_sha256).toBe(sha256(expected!));
  }
  return new Map(files.map((file) => [file.id, file]));
}

interface Delivery {
  id: string;
  event: string;
  event_id: string;
  status: string;
}

/**
 * Waits until no delivery of the webhook is pending, then checks that every one was delivered, that
 * the receiver got each event at least once, every copy under its one event id with the same signed
 * body, and that each `[file_id, event]` of `expected` was among them. Returns the requests received
 * per event id.
 */
export async function expectEventsDelivered(
  api: ProjectApi,
  webhookId: string,
  endpoint: Endpoint,
  expected: [fileId: string, event: string][],
  timeoutMs = 30_000,
): Promise<Map<string, Received[]>> {
  const deliveries = await until(
    'every webhook delivery to be settled',
    async () => {
      const list = await api<{ items: Delivery[] }>('GET', `/webhooks/${webhookId}/deliveries`);
      expectStatus(list, 200);
      return list.body.items.every((d) => d.status !== 'pending') && list.body.items;
    },
    timeoutMs,
  );
  const received = new Map<string, Received[]>();
  for (const request of endpoint.requests) {
    const id = String(request.headers['x-coffer-event-id']);
    received.set(id, [...(received.get(id) ?? []), request]);
  }
  for (const delivery of deliveries) {
    expect(delivery.status, `delivery ${delivery.id} (${delivery.event})`).toBe('delivered');
    const copies = received.get(delivery.event_id) ?? [];
    expect(copies.length, `event ${delivery.event_id} received`).toBeGreaterThanOrEqual(1);
    for (const copy of copies) {
      expect(copy.signatureValid).toBe(true);
      expect(copy.headers['x-coffer-event']).toBe(delivery.event);
      expect(copy.raw.equals(copies[0]!.raw), `copies of event ${delivery.event_id}`).toBe(true);
    }
  }
  // Nothing was received that the outbox does not hold.
  expect([...received.keys()].sort()).toEqual(deliveries.map((d) => d.event_id).sort());
  for (const [fileId, event] of expected) {
    expect(
      endpoint.requests.some((r) => r.json?.event === event && r.json?.data?.file_id === fileId),
      `${event} of ${fileId} delivered`,
    ).toBe(true);
  }
  return received;
}

/** The path of every file under `folder` (none when it does not exist), walking it while others change it. */
export async function filesUnder(folder: string): Promise<string[]> {
  let entries: Dirent[] | undefined;
  while (!entries) {
    // A folder removed during the walk fails it: walk again.
    entries = await readdir(folder, { recursive: true, withFileTypes: true }).catch(() =>
      existsSync(folder) ? undefined : [],
    );
  }
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

/** The store keys that have bytes under `objects`, and what unfinished uploads left there (temp files, parts). */
export async function onDisk(objects: string): Promise<{ keys: Set<string>; leftovers: string[] }> {
  const keys = new Set<string>();
  const leftovers: string[] = [];
  for (const file of await filesUnder(objects)) {
    const path = relative(objects, file).split(sep).join('/');
    if (path.startsWith('.tmp/') || path.startsWith('.multipart/')) leftovers.push(path);
    else if (!path.startsWith('.')) keys.add(path.replace(/\.meta\.json$/, '').replace(/\.parts\/\d+$/, ''));
  }
  return { keys, leftovers };
}

/**
 * Waits until the store's folder holds the objects of `live()` and nothing else: collection removed
 * what abandoned, failed or interrupted uploads left.
 */
export async function expectNothingLeft(
  objects: string,
  live: () => Promise<Set<string>>,
  timeoutMs = 30_000,
): Promise<void> {
  let last: { keys: Set<string>; leftovers: string[]; live: Set<string> } | undefined;
  try {
    await until(
      'collection to leave only the live objects on disk',
      async () => {
        const found = await onDisk(objects);
        last = { ...found, live: await live() };
        return (
          found.leftovers.length === 0 &&
          found.keys.size === last.live.size &&
          [...found.keys].every((key) => last!.live.has(key))
        );
      },
      timeoutMs,
    );
  } catch (error) {
    // Say what is left, not only that time ran out.
    expect({ onDisk: [...(last?.keys ?? [])].sort(), leftovers: last?.leftovers }).toEqual({
      onDisk: [...(last?.live ?? [])].sort(),
      leftovers: [],
    });
    throw error;
  }
}

/** The keys of every object the API serves for the project's files: current contents and versions. */
export async function servedKeys(api: ProjectApi): Promise<Set<string>> {
  const keys = new Set<string>();
  for (const file of await allFiles(api)) {
    if (file.status !== 'ready') continue;
    keys.add((await downloadOf(api, `/files/${file.id}/download`)).key);
    const versions = await api('GET', `/files/${file.id}/versions`);
    if (versions.status !== 200) continue; // versioning off
    for (const version of versions.body.items) keys.add(version.storage_key);
  }
  return keys;
}
