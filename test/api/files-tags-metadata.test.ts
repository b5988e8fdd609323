import { describe, expect, it } from 'vitest';
import { upload } from '../support/files.ts';
import { coffer, serveFiles } from '../support/files-api.ts';

serveFiles();

describe('tags and metadata', () => {
  it('replaces and unions tags, trimmed and unique', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project, { tags: ['a'] })).body;
    const replaced = await project.call('PUT', `/files/${file.id}/tags`, {
      body: { tags: [' x ', 'y', 'x'] },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.tags).toEqual(['x', 'y']);
    const added = await project.call('POST', `/files/${file.id}/tags`, { body: { tags: ['y', 'z'] } });
    expect(added.body.tags).toEqual(['x', 'y', 'z']);
    for (const tags of [[''], ['t'.repeat(65)], Array.from({ length: 51 }, (_, i) => `t${i}`)]) {
      const reply = await project.call('PUT', `/files/${file.id}/tags`, { body: { tags } });
      expect(reply.status).toBe(422);
      expect(reply.body.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await project.call('PUT', `/files/${file.id}/tags`, { body: { tags: 'x' } })).status).toBe(400);
  });

  it('replaces and merges metadata shallowly, within a size bound', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project, { metadata: { a: 1, nested: { x: 1 } } })).body;
    const merged = await project.call('POST', `/files/${file.id}/metadata`, {
      body: { metadata: { b: 2, nested: { y: 2 } } },
    });
    expect(merged.body.metadata).toEqual({ a: 1, b: 2, nested: { y: 2 } });
    const replaced = await project.call('PUT', `/files/${file.id}/metadata`, {
      body: { metadata: { c: 3 } },
    });
    expect(replaced.body.metadata).toEqual({ c: 3 });
    const big = await project.call('PUT', `/files/${file.id}/metadata`, {
      body: { metadata: { v: 'x'.repeat(20_000) } },
    });
    expect(big.status).toBe(422);
  });

  it('validates metadata against an enforced, active schema on every write', async () => {
    const project = await coffer.newProject({ enforce_schema: true });
    const schema = {
      type: 'object',
      properties: { team: { type: 'string' }, year: { type: 'integer', minimum: 2000 } },
      required: ['team'],
    };
    const put1 = await project.call('PUT', '/metadata-schema', { body: { schema, is_active: true } });
    expect(put1.status).toBe(200);
    expect(put1.body).toMatchObject({ schema, is_active: true });
    expect((await project.call('GET', '/metadata-schema')).body.schema).toEqual(schema);

    const refused = await project.call('POST', '/files/upload', {
      body: { filename: 'a.txt', content_type: 'text/plain', size_bytes: 1, metadata: { year: 1999 } },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('VALIDATION_ERROR');
    expect(refused.body.error.details.errors.length).toBeGreaterThan(0);

    const file = (await upload(project, { metadata: { team: 'a' } })).body;
    expect(
      (await project.call('POST', `/files/${file.id}/metadata`, { body: { metadata: { year: 2020 } } }))
        .status,
    ).toBe(200);
    const bad = await project.call('PUT', `/files/${file.id}/metadata`, {
      body: { metadata: { year: 2020 } },
    });
    expect(bad.status).toBe(422);

    await project.call('PUT', '/metadata-schema', { body: { schema, is_active: false } });
    expect((await project.call('PUT', `/files/${file.id}/metadata`, { body: { metadata: {} } })).status).toBe(
      200,
    );
    await project.call('PUT', '/metadata-schema', { body: { schema, is_active: true } });
    await project.call('PATCH', '', { body: { settings: { enforce_schema: false } } });
    expect((await project.call('PUT', `/files/${file.id}/metadata`, { body: { metadata: {} } })).status).toBe(
      200,
    );

    const invalid = await project.call('PUT', '/metadata-schema', { body: { schema: { type: 'nonsense' } } });
    expect(invalid.status).toBe(422);
    expect((await project.call('DELETE', '/metadata-schema')).status).toBe(204);
    expect((await project.call('GET', '/metadata-schema')).status).toBe(404);
  });
});
