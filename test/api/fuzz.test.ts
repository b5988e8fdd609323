import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../../src/modules/projects/schemas.ts';
import {
  ADMIN_KEY,
  expectStatus,
  startCoffer,
  type TestCoffer,
  type TestProject,
} from '../support/coffer.ts';
import { answerChecker, sender } from '../support/fuzz/check.ts';
import {
  describeRequest,
  type Fixtures,
  type FuzzRequest,
  operationsOf,
  requestTo,
} from '../support/fuzz/requests.ts';
import type { Schema } from '../support/fuzz/values.ts';

// A few hundred requests in the normal run; `npm run fuzz` sends more (COFFER_FUZZ_RUNS), and
// COFFER_FUZZ_SEED replays a run (a failure prints its seed and path).
const RUNS = Number(process.env.COFFER_FUZZ_RUNS ?? 300);
const SEED = Number(process.env.COFFER_FUZZ_SEED ?? 20_261_126);

let coffer: TestCoffer;
let project: TestProject;
let document: Schema;
let fixtures: Fixtures;

/** Real records for the path parameters, so that most requests reach the services. */
async function createFixtures(): Promise<Fixtures> {
  const other = await coffer.newProject();
  const created = async (method: string, path: string, body?: unknown, token = project.key) => {
    const reply = await coffer.call(method, `/v1/projects/${project.id}${path}`, { token, body });
    expect(reply.status, `${path}: ${JSON.stringify(reply.body)}`).toBeLessThan(300);
    return reply.body;
  };
  // A few of each, so that a fuzzed deletion of one leaves others to reach.
  const several = async <T>(make: (index: number) => Promise<T>) => [
    await make(0),
    await make(1),
    await make(2),
  ];
  const readyFile = async () => {
    const file = await created('POST', '/files/upload', {
      filename: 'a.txt',
      content_type: 'text/plain',
      size_bytes: 3,
    });
    const put = await fetch(file.upload_url, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: 'abc',
    });
    expect(put.status).toBe(200);
    await created('POST', `/files/${file.file_id}/confirm`);
    return file.file_id as string;
  };
  const folders = await several((index) => created('POST', '/folders', { name: `fuzzed ${index}` }));
  const files = await several(readyFile);
  const versions = await created('GET', `/files/${files[0]}/versions`);
  const sessions = await several(() =>
    created('POST', '/files/upload/multipart/start', {
      filename: 'm.bin',
      content_type: 'application/octet-stream',
      total_size_bytes: 10,
    }),
  );
  const webhooks = await several(() =>
    created('POST', '/webhooks', { url: 'https://93.184.215.14/hook', events: ['file.ready'] }),
  );
  // Keys that a fuzzed revocation may take: not the one the requests are made with.
  const revocable = { name: 'revocable', scopes: ['files:read'] };
  const keys = await several(() => created('POST', '/api-keys', revocable, ADMIN_KEY));
  const credentials = await several(() => created('POST', '/s3-credentials', revocable, ADMIN_KEY));
  const token = await created('POST', '/upload-tokens', {});
  const idsOf = (records: { id: string }[]) => records.map((record) => record.id);
  return {
    adminKey: ADMIN_KEY,
    apiKey: project.key,
    uploadToken: token.token,
    otherProjectKey: other.key,
    ids: {
      project_id: [project.id],
      org_id: [project.organizationId],
      folder_id: idsOf(folders),
      file_id: files,
      version_id: idsOf(versions.items),
      upload_id: sessions.map((session) => session.upload_id),
      webhook_id: idsOf(webhooks),
      delivery_id: ['dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV'],
      key_id: idsOf(keys),
      credential_id: idsOf(credentials),
    },
  };
}

/** Puts back what a fuzzed request may have changed that would make every later one fail the same way. */
async function restore(request: FuzzRequest, status: number) {
  if (status < 300 && request.operation.spec.operationId === 'updateProject') {
    const reply = await coffer.call('PATCH', `/v1/projects/${project.id}`, {
      token: ADMIN_KEY,
      body: { settings: { ...DEFAULT_SETTINGS, versioning_enabled: true } },
    });
    expectStatus(reply, 200);
  }
}

beforeAll(async () => {
  coffer = await startCoffer({
    // Wrong credentials are part of what is sent: they must not get the test's address refused.
    COFFER_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '0',
    COFFER_RATE_LIMIT_IP_PER_MINUTE: '0',
  });
  project = await coffer.newProject({ versioning_enabled: true });
  document = (await coffer.call('GET', '/openapi.json')).body;
  fixtures = await createFixtures();
});
afterAll(() => coffer?.close());

describe('requests generated from the OpenAPI document', () => {
  it(
    'are answered without a 5xx, with a declared status and a body of its schema',
    async () => {
      const components = document.components.schemas as Record<string, Schema>;
      const check = answerChecker(document);
      const { send, close } = sender(coffer.url);
      const requests = fc.oneof(
        ...operationsOf(document).map((operation) => requestTo(operation, components, fixtures, coffer.url)),
      );
      try {
        await fc.assert(
          fc.asyncProperty(requests, async (request) => {
            const answer = await send(request);
            await restore(request, answer.status);
            const problems = check(request, answer);
            if (problems.length) {
              throw new Error(
                `${describeRequest(request)}\n→ ${answer.status} ${answer.text.slice(0, 500)}\n${problems.join('\n')}`,
              );
            }
          }),
          { numRuns: RUNS, seed: SEED, endOnFailure: true },
        );
      } finally {
        await close();
      }
    },
    60_000 + RUNS * 200,
  );
});
