import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openPglite, openPostgres, quoteIdent } from '../../src/infra/db.ts';
import { migrate } from '../../src/infra/migrate.ts';
import { loadMigrations } from '../../src/infra/migrations/index.ts';
import { bucketBase, isReservedBucketName } from '../../src/modules/projects/bucket.ts';
import { findProjectByBucket } from '../../src/modules/projects/repo.ts';
import { backend, namespace } from '../support/backends.ts';
import { ADMIN_KEY, expectStatus, startCoffer, type TestCoffer } from '../support/coffer.ts';

const BUCKET = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/;
const admin = { token: ADMIN_KEY };

let coffer: TestCoffer;
let organizationId: string;
beforeAll(async () => {
  coffer = await startCoffer();
  organizationId = (await coffer.call('POST', '/v1/organizations', { ...admin, body: { name: 'Buckets' } }))
    .body.id;
});
afterAll(() => coffer.close());

/** A word no other test (or run sharing the database) uses. */
const unique = () => `b${randomBytes(5).toString('hex')}`;

const create = (body: Record<string, unknown>, token = ADMIN_KEY) =>
  coffer.call('POST', `/v1/organizations/${organizationId}/projects`, { token, body });

describe('the bucket of a project', () => {
  it('is derived from the name: accents dropped, lowercased, other characters to hyphens, trimmed', async () => {
    const word = unique();
    const project = await create({ name: `  Ünïque Café — ${word}!! ` });
    expectStatus(project, 201);
    expect(project.body.bucket).toBe(`unique-cafe-${word}`);
    const fetched = await coffer.call('GET', `/v1/projects/${project.body.id}`, admin);
    expect(fetched.body.bucket).toBe(`unique-cafe-${word}`);
    expect(await findProjectByBucket(coffer.services.db, `unique-cafe-${word}`)).toMatchObject({
      id: project.body.id,
    });
  });

  it('is made unique with a short suffix when the derived one is taken', async () => {
    const name = `Shared ${unique()}`;
    const first = (await create({ name })).body.bucket;
    const second = (await create({ name })).body.bucket;
    const third = (await create({ name })).body.bucket;
    expect(first).toBe(bucketBase(name));
    expect(second).toMatch(new RegExp(`^${first}-[a-z0-9]{6}$`));
    expect(third).toMatch(new RegExp(`^${first}-[a-z0-9]{6}$`));
    expect(new Set([first, second, third]).size).toBe(3);
  });

  it('is padded or truncated to fit 3 to 63 characters', async () => {
    const short = await create({ name: 'A' });
    expect(short.body.bucket).toMatch(/^a-[a-z0-9]{6}$/);
    const symbols = await create({ name: '!!! ???' });
    expect(symbols.body.bucket).toMatch(/^project(-[a-z0-9]{6})?$/);
    const long = await create({ name: `${'Very long name '.repeat(10)}${unique()}` });
    expect(long.body.bucket.length).toBeLessThanOrEqual(63);
    for (const bucket of [short.body.bucket, symbols.body.bucket, long.body.bucket]) {
      expect(bucket).toMatch(BUCKET);
    }
    expect(bucketBase('-a--b-')).toBe('a-b');
    // Never as S3 reserves: a reserved prefix is dropped, a reserved suffix gets a suffix of its own.
    const prefixed = await create({ name: `sthree ${unique()}` });
    expect(prefixed.body.bucket).toMatch(/^b[0-9a-f]{10}$/);
    // Each prefix dropped, however many follow one another.
    for (const name of ['amzn-s3-demo sthree x', 'sthree sthree x', 'xn sthree']) {
      expect(isReservedBucketName(bucketBase(name)), name).toBe(false);
    }
    const suffixed = await create({ name: `${unique()} s3alias` });
    expect(suffixed.body.bucket).toMatch(/^b[0-9a-f]{10}-s3alias-[a-z0-9]{6}$/);
    expect(bucketBase(`${'x'.repeat(62)}-yz`)).toBe('x'.repeat(62));
  });

  it('may be chosen at creation; a taken one is 409 CONFLICT', async () => {
    const bucket = `chosen-${unique()}`;
    const project = await create({ name: 'Anything', bucket });
    expectStatus(project, 201);
    expect(project.body.bucket).toBe(bucket);
    const again = await create({ name: 'Other', bucket });
    expectStatus(again, 409);
    expect(again.body.error).toMatchObject({ code: 'CONFLICT', details: { field: 'bucket', value: bucket } });
    // A derived name never takes it either.
    const derived = await create({ name: bucket });
    expect(derived.body.bucket).toMatch(new RegExp(`^${bucket}-[a-z0-9]{6}$`));
  });

  it.each([
    ['ab'],
    ['x'.repeat(64)],
    ['Upper-case'],
    ['-leading'],
    ['trailing-'],
    ['under_score'],
    ['dots.in.name'],
    ['spaces in'],
    // Prefixes and suffixes S3 reserves for its own buckets and aliases.
    ['xn--punycode'],
    ['sthree-bucket'],
    ['amzn-s3-demo-bucket'],
    ['bucket-s3alias'],
    ['bucket--ol-s3'],
    ['bucket--x-s3'],
    ['bucket--table-s3'],
  ])('refuses the name %j with 422 VALIDATION_ERROR', async (bucket) => {
    const created = await create({ name: 'Invalid', bucket });
    expectStatus(created, 422);
    expect(created.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'bucket' } });
    const project = (await create({ name: 'Valid' })).body;
    const patched = await coffer.call('PATCH', `/v1/projects/${project.id}`, { ...admin, body: { bucket } });
    expectStatus(patched, 422);
    expect(patched.body.error.details.field).toBe('bucket');
  });

  it('changes by PATCH with the admin key only; a project key may send the one it has', async () => {
    const project = await coffer.newProject();
    const current = (await project.call('GET', '')).body.bucket as string;
    const wanted = `renamed-${unique()}`;
    const refused = await project.call('PATCH', '', { body: { bucket: wanted } });
    expectStatus(refused, 403);
    expect(refused.body.error).toMatchObject({
      code: 'INSUFFICIENT_SCOPE',
      details: { field: 'bucket', required_scope: 'admin' },
    });
    expectStatus(await project.call('PATCH', '', { body: { bucket: current, name: 'Same bucket' } }), 200);

    // Looked up by bucket first, so that the cache holds it.
    expect((await coffer.services.projects.getProjectByBucket(current))?.id).toBe(project.id);
    const patched = await project.call('PATCH', '', { token: ADMIN_KEY, body: { bucket: wanted } });
    expectStatus(patched, 200);
    expect(patched.body.bucket).toBe(wanted);
    expect(await coffer.services.projects.getProjectByBucket(current)).toBeUndefined();
    expect(await coffer.services.projects.getProjectByBucket(wanted)).toMatchObject({
      id: project.id,
      bucket: wanted,
    });
    expect((await project.call('GET', '')).body.bucket).toBe(wanted);

    const audit = await project.call('GET', '/audit-log?action=project.update', { token: ADMIN_KEY });
    expect(audit.body.items[0]).toMatchObject({ before: { bucket: current }, after: { bucket: wanted } });
  });

  it('answers 409 CONFLICT when PATCH asks for a taken bucket', async () => {
    const taken = (await create({ name: `Taken ${unique()}` })).body.bucket;
    const project = (await create({ name: 'Wants it' })).body;
    const patched = await coffer.call('PATCH', `/v1/projects/${project.id}`, {
      ...admin,
      body: { bucket: taken },
    });
    expectStatus(patched, 409);
    expect(patched.body.error).toMatchObject({ code: 'CONFLICT', details: { field: 'bucket' } });
    expect((await coffer.call('GET', `/v1/projects/${project.id}`, admin)).body.bucket).toBe(project.bucket);
  });

  it('is found through the project cache, and not for names that are no bucket', async () => {
    const project = (await create({ name: `Cached ${unique()}` })).body;
    const { projects, cache } = coffer.services;
    expect(await projects.getProjectByBucket(project.bucket)).toMatchObject({ id: project.id });
    // Where lookups are cached at all (see services.ts).
    if (cache.shared || coffer.services.db.kind === 'pglite') {
      expect(await cache.get(`bucket:${project.bucket}`)).toBe(JSON.stringify(project.id));
    }
    expect(await projects.getProjectByBucket(`missing-${unique()}`)).toBeUndefined();
    expect(await projects.getProjectByBucket('NOT A BUCKET')).toBeUndefined();
  });

  it('is in the OpenAPI document', async () => {
    const document = (await coffer.call('GET', '/openapi.json')).body;
    const schemas = document.components.schemas;
    expect(schemas.Project.required).toContain('bucket');
    expect(schemas.CreateProjectRequest.properties.bucket).toMatchObject({ pattern: BUCKET.source });
    expect(schemas.UpdateProjectRequest.properties.bucket).toMatchObject({ minLength: 3, maxLength: 63 });
  });
});

describe('migration 014', () => {
  let db: Db;
  let schema: string | undefined;
  beforeAll(async () => {
    if (backend === 'postgres') {
      schema = `${namespace()}_m014`;
      const server = await openPostgres(process.env.COFFER_TEST_DATABASE_URL!);
      await server.query(`CREATE SCHEMA ${quoteIdent(schema)}`);
      await server.close();
      db = await openPostgres(process.env.COFFER_TEST_DATABASE_URL!, { schema });
    } else {
      db = await openPglite(undefined);
    }
  });
  afterAll(async () => {
    if (schema) await db.query(`DROP SCHEMA ${quoteIdent(schema)} CASCADE`);
    await db.close();
  });

  it('gives every existing project a valid, unique bucket derived from its name', async () => {
    await migrate(
      db,
      loadMigrations().filter((migration) => migration.name < '014'),
    );
    await db.query(`INSERT INTO organizations (id, name) VALUES ('org_1', 'o')`);
    const names = ['Photos', 'Photos', 'Café Crème', 'A', '***', 'x'.repeat(80), 'photos'];
    for (const [index, name] of names.entries()) {
      await db.query(
        `INSERT INTO projects (id, organization_id, name, settings) VALUES ($1, 'org_1', $2, '{}')`,
        [`proj_${index}`, name],
      );
    }
    // 014 alone: later migrations are not this test's.
    const through014 = loadMigrations().filter((migration) => migration.name < '015');
    expect(await migrate(db, through014)).toEqual(['014_s3_credentials.sql']);
    const rows = await db.query<{ id: string; bucket: string }>(
      'SELECT id, bucket FROM projects ORDER BY id',
    );
    const buckets = rows.map((row) => row.bucket);
    for (const bucket of buckets) expect(bucket).toMatch(BUCKET);
    expect(new Set(buckets).size).toBe(names.length);
    expect(buckets[0]).toBe('photos');
    expect(buckets[1]).toMatch(/^photos-[a-z0-9]{6}$/);
    expect(buckets[2]).toBe('cafe-creme');
    expect(buckets[3]).toMatch(/^a-[a-z0-9]{6}$/);
    expect(buckets[4]).toBe('project');
    expect(buckets[5]).toBe('x'.repeat(63));
    expect(buckets[6]).toMatch(/^photos-[a-z0-9]{6}$/);
    // The same derivation as the service's for new projects.
    expect(buckets[2]).toBe(bucketBase('Café Crème'));
    await expect(
      db.query(`UPDATE projects SET bucket = 'Not-Valid' WHERE id = 'proj_0'`),
    ).rejects.toMatchObject({ code: '23514' });
  });
});
