import { Writable } from 'node:stream';
import { DeleteObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/app.ts';
import type { Principal } from '../../src/domain/principal.ts';
import { findByKey } from '../../src/modules/files/key-repo.ts';
import { backend } from '../support/backends.ts';
import {
  ADMIN_KEY,
  expectStatus,
  keyWith,
  startCoffer,
  type TestCoffer,
  type TestProject,
} from '../support/coffer.ts';
import { s3ClientOf } from '../support/s3-endpoint.ts';

const admin = { token: ADMIN_KEY };
const SECRET = /^[A-Za-z0-9_-]{40}$/;

let coffer: TestCoffer;
let project: TestProject;
beforeAll(async () => {
  coffer = await startCoffer();
  project = await coffer.newProject();
});
afterAll(() => coffer.close());
afterEach(() => {
  vi.restoreAllMocks();
});

type Resolved = Awaited<ReturnType<TestCoffer['services']['s3Credentials']['resolveS3Credential']>>;

/** A credential that resolves, else undefined; 'expired' is not expected (the expiry tests look for it). */
function usable(found: Resolved) {
  expect(found).not.toBe('expired');
  return found === 'expired' ? undefined : found;
}

const resolveAny = (accessKeyId: string, sessionToken?: string, key?: string) =>
  coffer.services.s3Credentials.resolveS3Credential(accessKeyId, sessionToken, key);
const resolve = async (accessKeyId: string, sessionToken?: string, key?: string) =>
  usable(await resolveAny(accessKeyId, sessionToken, key));

async function createCredential(
  scopes: string[] = ['files:read', 'files:upload'],
  on: TestProject = project,
  name = 'backup tool',
) {
  const reply = await on.call('POST', '/s3-credentials', { ...admin, body: { name, scopes } });
  expectStatus(reply, 201);
  return reply.body as {
    id: string;
    name: string;
    access_key_id: string;
    secret_access_key: string;
    scopes: string[];
    created_at: string;
  };
}

async function uploadToken(body: Record<string, unknown> = {}) {
  const reply = await project.call('POST', '/upload-tokens', { body });
  expectStatus(reply, 201);
  return reply.body as { token: string; expires_at: string };
}

async function temporary(token: string, body?: Record<string, unknown>, on: TestProject = project) {
  return on.call('POST', '/s3-credentials/temporary', { token, body });
}

describe('long-lived S3 credentials', () => {
  it('are created with the admin key; the secret is shown once', async () => {
    const created = await createCredential(['files:read', 'files:upload', 'files:delete'], project, 'sync');
    expect(created).toEqual({
      id: expect.stringMatching(/^key_[0-9A-Z]{26}$/),
      name: 'sync',
      access_key_id: expect.stringMatching(/^CFR[A-Z0-9]{17}$/),
      secret_access_key: expect.stringMatching(SECRET),
      scopes: ['files:read', 'files:upload', 'files:delete'],
      created_at: expect.any(String),
    });

    const list = await project.call('GET', '/s3-credentials', admin);
    expectStatus(list, 200);
    expect(list.body.total).toBe(list.body.items.length);
    const listed = list.body.items.find((item: { id: string }) => item.id === created.id);
    expect(listed).toEqual({
      id: created.id,
      name: 'sync',
      access_key_id: created.access_key_id,
      scopes: created.scopes,
      created_at: created.created_at,
      revoked_at: null,
    });
    expect(JSON.stringify(list.body)).not.toContain(created.secret_access_key);
  });

  it('keep the secret encrypted at rest, out of the audit log and out of the logs', async () => {
    const lines: string[] = [];
    const logged = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    // The same services behind an app that logs every request.
    const app = await buildApp({
      config: coffer.config,
      services: coffer.services,
      logger: pino({ level: 'trace' }, logged),
    });
    try {
      const reply = await app.inject({
        method: 'POST',
        url: `/v1/projects/${project.id}/s3-credentials`,
        headers: { authorization: `Bearer ${ADMIN_KEY}` },
        body: { name: 'logged', scopes: ['files:read'] },
      });
      expect(reply.statusCode).toBe(201);
      const { secret_access_key: secret, access_key_id: accessKeyId, id } = reply.json();
      expect(lines.length).toBeGreaterThan(0);
      expect(lines.join('')).not.toContain(secret);

      const [row] = await coffer.services.db.query<Record<string, unknown>>(
        'SELECT * FROM s3_credentials WHERE id = $1',
        [id],
      );
      expect(row).toMatchObject({ access_key_id: accessKeyId, revoked_at: null });
      expect(JSON.stringify(row)).not.toContain(secret);

      await project.call('DELETE', `/s3-credentials/${id}`, admin);
      const audit = await project.call('GET', '/audit-log', admin);
      const entries = audit.body.items.filter(
        (entry: { targets: Record<string, string> }) => entry.targets.s3_credential_id === id,
      );
      expect(entries.map((entry: { action: string }) => entry.action)).toEqual([
        's3_credential.revoke',
        's3_credential.create',
      ]);
      expect(entries[1]).toMatchObject({
        actor_type: 'admin',
        after: { name: 'logged', access_key_id: accessKeyId, scopes: ['files:read'] },
      });
      expect(JSON.stringify(audit.body)).not.toContain(secret);
    } finally {
      await app.close();
    }
  });

  it('are managed with the admin key only', async () => {
    const created = await createCredential();
    const scoped = await keyWith(coffer, project, ['projects:read', 'projects:update']);
    const attempts = [
      project.call('POST', '/s3-credentials', { body: { name: 'x', scopes: ['files:read'] } }),
      project.call('GET', '/s3-credentials'),
      project.call('DELETE', `/s3-credentials/${created.id}`, { token: scoped.key }),
    ];
    for (const reply of await Promise.all(attempts)) {
      expectStatus(reply, 403);
      expect(reply.body.error.code).toBe('INSUFFICIENT_SCOPE');
    }
    const token = await uploadToken();
    expectStatus(await project.call('GET', '/s3-credentials', { token: token.token }), 403);
    expect(await resolve(created.access_key_id)).toBeDefined();
  });

  it('take only the file scopes S3 maps onto, at least one', async () => {
    for (const scopes of [[], ['projects:read'], ['files:download'], ['files:read', 'files:read']]) {
      const reply = await project.call('POST', '/s3-credentials', { ...admin, body: { name: 'x', scopes } });
      expectStatus(reply, 422);
      expect(reply.body.error.details.field).toMatch(/^scopes/);
    }
    const blank = await project.call('POST', '/s3-credentials', {
      ...admin,
      body: { name: '  ', scopes: ['files:read'] },
    });
    expectStatus(blank, 422);
    const unknown = await project.call('POST', '/s3-credentials', {
      ...admin,
      body: { name: 'x', scopes: ['files:read'], extra: 1 },
    });
    expectStatus(unknown, 400);
  });

  it('resolve to their secret, an s3_credential principal and the project', async () => {
    const created = await createCredential(['files:read', 'files:delete']);
    const resolved = await resolve(created.access_key_id);
    expect(resolved).toBeDefined();
    expect(resolved!.secretAccessKey).toBe(created.secret_access_key);
    expect(resolved!.principal).toEqual({
      kind: 's3_credential',
      credentialId: created.id,
      projectId: project.id,
      scopes: ['files:read', 'files:delete'],
    } satisfies Principal);
    expect(resolved!.project).toMatchObject({ id: project.id, bucket: expect.any(String) });
    // Twice (from the cache, where lookups are cached): the same.
    expect(await resolve(created.access_key_id)).toEqual(resolved);
    // A session token does not go with a long-lived key; an empty one is none.
    expect(await resolve(created.access_key_id, 'anything')).toBeUndefined();
    expect((await resolve(created.access_key_id, ''))?.secretAccessKey).toBe(created.secret_access_key);
  });

  it('bring the file S3 shows at a key when read from the database, as the key lookup finds it', async () => {
    const writer = await createCredential(['files:read', 'files:upload', 'files:delete']);
    const { bucket } = (await resolve(writer.access_key_id))!.project;
    const client = s3ClientOf(coffer, writer);
    // A credential's first lookup reads the database on every backend: each check takes a new one.
    const atKey = async (key: string) =>
      (await resolve((await createCredential()).access_key_id, undefined, key))!.atKey;
    const key = 'joined/a.txt';
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'first' }));
    const first = await findByKey(coffer.services.db, project.id, key);
    expect(first).toBeDefined();
    expect(await atKey(key)).toEqual({ file: first });
    // New content: the newest, with its own storage key.
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'second' }));
    const second = await findByKey(coffer.services.db, project.id, key);
    expect(second!.storage_key).not.toBe(first!.storage_key);
    expect(await atKey(key)).toEqual({ file: second });
    // Deleted, or never there: none.
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    expect(await atKey(key)).toEqual({ file: undefined });
    expect(await atKey('joined/missing.txt')).toEqual({ file: undefined });
    // Another project's file at the same key is not this credential's.
    const other = await coffer.newProject();
    const stranger = await createCredential(['files:read', 'files:upload'], other);
    const strangerBucket = (await resolve(stranger.access_key_id))!.project.bucket;
    await s3ClientOf(coffer, stranger).send(
      new PutObjectCommand({ Bucket: strangerBucket, Key: 'joined/b.txt', Body: 'theirs' }),
    );
    expect(await atKey('joined/b.txt')).toEqual({ file: undefined });
    // Without a key, no file is looked up.
    expect(await resolve((await createCredential()).access_key_id)).not.toHaveProperty('atKey');
  });

  it('resolve to nothing for unknown or malformed access key ids', async () => {
    expect(await resolve('CFRAAAAAAAAAAAAAAAAA')).toBeUndefined();
    expect(await resolve('AKIAIOSFODNN7EXAMPLE')).toBeUndefined();
    expect(await resolve('')).toBeUndefined();
    expect(await resolve(`cfr${'a'.repeat(17)}`)).toBeUndefined();
  });

  it('are refused at once when revoked, through the cache too', async () => {
    const created = await createCredential();
    const { bucket } = (await resolve(created.access_key_id))!.project; // cached now, where lookups are
    // Signed requests made: the opened secret and the day's signing key are kept in this process.
    const client = s3ClientOf(coffer, created);
    const list = () => client.send(new ListObjectsV2Command({ Bucket: bucket }));
    for (let i = 0; i < 2; i++) expect((await list()).$metadata.httpStatusCode).toBe(200);
    // The same access key with another secret is still refused.
    const forged = s3ClientOf(coffer, { ...created, secret_access_key: 'x'.repeat(40) });
    await expect(forged.send(new ListObjectsV2Command({ Bucket: bucket }))).rejects.toMatchObject({
      name: 'SignatureDoesNotMatch',
    });
    const revoked = await project.call('DELETE', `/s3-credentials/${created.id}`, admin);
    expectStatus(revoked, 204);
    expect(await resolve(created.access_key_id)).toBeUndefined();
    await expect(list()).rejects.toMatchObject({ name: 'InvalidAccessKeyId' });
    const listed = (await project.call('GET', '/s3-credentials', admin)).body.items.find(
      (item: { id: string }) => item.id === created.id,
    );
    expect(listed.revoked_at).toEqual(expect.any(String));
    expectStatus(await project.call('DELETE', `/s3-credentials/${created.id}`, admin), 204);
    const unknown = await project.call('DELETE', '/s3-credentials/key_01ARZ3NDEKTSV4RRFFQ69G5FAV', admin);
    expectStatus(unknown, 404);
  });

  it('belong to their project: another project cannot list or revoke them', async () => {
    const created = await createCredential();
    const other = await coffer.newProject();
    expectStatus(await other.call('DELETE', `/s3-credentials/${created.id}`, admin), 404);
    const list = (await other.call('GET', '/s3-credentials', admin)).body;
    expect(list.items.map((item: { id: string }) => item.id)).not.toContain(created.id);
    expect((await resolve(created.access_key_id))?.project.id).toBe(project.id);
  });

  it.runIf(backend === 'postgres')('are refused at once on every server after a revocation', async () => {
    const second = await startCoffer();
    try {
      const created = await createCredential();
      const onSecond = async (id: string) =>
        usable(await second.services.s3Credentials.resolveS3Credential(id, undefined));
      expect((await onSecond(created.access_key_id))?.secretAccessKey).toBe(created.secret_access_key);
      expectStatus(await project.call('DELETE', `/s3-credentials/${created.id}`, admin), 204);
      expect(await onSecond(created.access_key_id)).toBeUndefined();
    } finally {
      await second.close();
    }
  });
});

describe('temporary S3 credentials', () => {
  it('are issued to an upload token, with its folder as the prefix, and expire no later than it', async () => {
    const token = await uploadToken({ folder_path: 'photos/2026', expires_in: 600 });
    const reply = await temporary(token.token);
    expectStatus(reply, 201);
    const bucket = (await project.call('GET', '')).body.bucket;
    expect(reply.body).toEqual({
      access_key_id: expect.stringMatching(/^CFT[A-Z0-9]{17}$/),
      secret_access_key: expect.stringMatching(SECRET),
      session_token: expect.stringMatching(/^[A-Za-z0-9_-]+$/),
      expiration: expect.any(String),
      region: 'us-east-1',
      endpoint: `${coffer.config.publicUrl}/s3`,
      bucket,
      prefix: 'photos/2026/',
    });
    // The default hour is capped by the token's 10 minutes.
    const expiration = Date.parse(reply.body.expiration);
    expect(expiration).toBeLessThanOrEqual(Date.parse(token.expires_at));
    expect(expiration).toBeGreaterThan(Date.parse(token.expires_at) - 2000);

    const resolved = await resolve(reply.body.access_key_id, reply.body.session_token);
    expect(resolved?.secretAccessKey).toBe(reply.body.secret_access_key);
    expect(resolved?.principal).toMatchObject({
      kind: 'upload_token',
      tokenId: expect.stringMatching(/^tok_/),
      projectId: project.id,
      scopes: ['files:upload', 'files:read'],
    });
    expect(resolved?.project.id).toBe(project.id);
  });

  it('take expires_in from 60 s to 12 hours, capped by the upload token', async () => {
    const token = await uploadToken({ expires_in: 86_400 });
    const before = Date.now();
    const short = await temporary(token.token, { expires_in: 60 });
    expectStatus(short, 201);
    expect(Date.parse(short.body.expiration) - before).toBeGreaterThan(58_000);
    expect(Date.parse(short.body.expiration) - before).toBeLessThanOrEqual(61_000);
    const long = await temporary(token.token, { expires_in: 43_200 });
    expect(Date.parse(long.body.expiration) - before).toBeGreaterThan(43_198_000);
    expect(long.body.prefix).toBe('');
    for (const expires_in of [59, 43_201]) {
      const refused = await temporary(token.token, { expires_in });
      expectStatus(refused, 422);
      expect(refused.body.error.details.field).toBe('expires_in');
    }
    expectStatus(await temporary(token.token, { expires_in: '60' }), 400);
  });

  it('are issued to an API key, acting with its scopes until it is revoked', async () => {
    const key = await keyWith(coffer, project, ['files:read', 'files:upload']);
    const before = Date.now();
    const reply = await temporary(key.key, { expires_in: 7200 });
    expectStatus(reply, 201);
    expect(reply.body.prefix).toBe('');
    expect(Date.parse(reply.body.expiration) - before).toBeGreaterThan(7_198_000);
    const resolved = await resolve(reply.body.access_key_id, reply.body.session_token);
    expect(resolved?.principal).toEqual({
      kind: 'api_key',
      keyId: key.id,
      projectId: project.id,
      scopes: ['files:read', 'files:upload'],
    } satisfies Principal);
    expect(resolved?.secretAccessKey).toBe(reply.body.secret_access_key);

    expectStatus(await project.call('DELETE', `/api-keys/${key.id}`, admin), 204);
    expect(await resolve(reply.body.access_key_id, reply.body.session_token)).toBeUndefined();
  });

  it('stop with their upload token', async () => {
    const token = await uploadToken({ expires_in: 3600 });
    const reply = await temporary(token.token);
    const { access_key_id: id, session_token: session } = reply.body;
    const resolved = await resolve(id, session);
    expect(resolved?.principal.kind).toBe('upload_token');
    const tokenId = (resolved!.principal as { tokenId: string }).tokenId;
    await coffer.services.db.query(
      `UPDATE upload_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`,
      [tokenId],
    );
    expect(await resolveAny(id, session)).toBe('expired');
  });

  it('stop at their expiration', async () => {
    const token = await uploadToken();
    const reply = await temporary(token.token, { expires_in: 60 });
    const { access_key_id: id, session_token: session, expiration } = reply.body;
    expect(await resolve(id, session)).toBeDefined();
    const now = Date.now;
    vi.spyOn(Date, 'now').mockImplementation(() => Date.parse(expiration));
    expect(await resolveAny(id, session)).toBe('expired');
    vi.spyOn(Date, 'now').mockImplementation(() => now() + 1000);
    expect(await resolve(id, session)).toBeDefined();
  });

  it('are refused with a tampered, foreign or missing session token', async () => {
    const token = await uploadToken();
    const first = (await temporary(token.token)).body;
    const second = (await temporary(token.token)).body;
    expect(first.access_key_id).not.toBe(second.access_key_id);
    expect(first.secret_access_key).not.toBe(second.secret_access_key);
    expect(await resolve(first.access_key_id, first.session_token)).toBeDefined();

    const bytes = Buffer.from(first.session_token, 'base64url');
    for (const index of [0, 5, 20, bytes.length - 1]) {
      const tampered = Buffer.from(bytes);
      tampered[index] = tampered[index]! ^ 0x20;
      expect(
        await resolve(first.access_key_id, tampered.toString('base64url')),
        `byte ${index}`,
      ).toBeUndefined();
    }
    // Another credential's token names another access key id.
    expect(await resolve(first.access_key_id, second.session_token)).toBeUndefined();
    expect(await resolve(first.access_key_id)).toBeUndefined();
    expect(await resolve(first.access_key_id, '')).toBeUndefined();
    expect(await resolve(first.access_key_id, 'x'.repeat(200))).toBeUndefined();
    // A temporary access key id is no long-lived one, and the reverse.
    expect(await resolve(first.access_key_id.replace(/^CFT/, 'CFR'))).toBeUndefined();
  });

  it('are verified by any server holding the same key, and by none holding another', async () => {
    const token = await uploadToken();
    const reply = (await temporary(token.token)).body;
    const same = await startCoffer(
      backend === 'postgres' ? {} : { COFFER_SECRET_KEY: coffer.services.secretKey.toString('base64') },
    );
    const other = await startCoffer({ COFFER_SECRET_KEY: Buffer.alloc(32, 9).toString('base64') });
    try {
      const onSame = usable(
        await same.services.s3Credentials.resolveS3Credential(reply.access_key_id, reply.session_token),
      );
      expect(onSame?.secretAccessKey).toBe(reply.secret_access_key);
      expect(
        await other.services.s3Credentials.resolveS3Credential(reply.access_key_id, reply.session_token),
      ).toBeUndefined();
    } finally {
      await same.close();
      await other.close();
    }
  });

  it("are not issued to the admin key, and only on the credential's own project", async () => {
    const refused = await temporary(ADMIN_KEY);
    expectStatus(refused, 403);
    expect(refused.body.error.code).toBe('INSUFFICIENT_SCOPE');
    const other = await coffer.newProject();
    const token = await uploadToken();
    expectStatus(await temporary(token.token, undefined, other), 404);
    expectStatus(await temporary(other.key), 404);
    expectStatus(await temporary('coffer_live_unknown'), 401);
  });

  it('are audited as issued to their token or key, without their secret or session token', async () => {
    const token = await uploadToken();
    const reply = (await temporary(token.token, { expires_in: 120 })).body;
    const audit = await project.call('GET', '/audit-log?action=s3_credential.create_temporary', admin);
    const entry = audit.body.items.find(
      (item: { after: { access_key_id: string } }) => item.after.access_key_id === reply.access_key_id,
    );
    expect(entry).toMatchObject({
      actor_type: 'upload_token',
      actor_id: expect.stringMatching(/^tok_/),
      targets: { upload_token_id: expect.stringMatching(/^tok_/) },
      after: { access_key_id: reply.access_key_id, expiration: reply.expiration, prefix: '' },
    });
    const text = JSON.stringify(audit.body);
    expect(text).not.toContain(reply.secret_access_key);
    expect(text).not.toContain(reply.session_token);
  });
});

describe('the OpenAPI document', () => {
  it('names the S3 credential operations and their bodies', async () => {
    const document = (await coffer.call('GET', '/openapi.json')).body;
    const base = '/v1/projects/{project_id}/s3-credentials';
    expect(document.paths[base].post.operationId).toBe('createS3Credential');
    expect(document.paths[base].get.operationId).toBe('listS3Credentials');
    expect(document.paths[`${base}/{credential_id}`].delete.operationId).toBe('revokeS3Credential');
    expect(document.paths[`${base}/temporary`].post.operationId).toBe('createTemporaryS3Credentials');
    expect(document.paths[`${base}/temporary`].post.description).toContain(
      'Requires: an upload token or an API key (any scope) of the project.',
    );
    for (const name of [
      'S3Credential',
      'S3CredentialList',
      'CreatedS3Credential',
      'CreateS3CredentialRequest',
      'CreateTemporaryS3CredentialsRequest',
      'TemporaryS3Credentials',
    ]) {
      expect(document.components.schemas, name).toHaveProperty(name);
    }
  });
});
