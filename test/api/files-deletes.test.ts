import { describe, expect, it } from 'vitest';
import { startCoffer } from '../support/coffer.ts';
import { initiate, put, upload } from '../support/files.ts';
import { coffer, eventsOf, serveFiles } from '../support/files-api.ts';

serveFiles();

describe('delete, legal hold and quarantine', () => {
  it('soft-deletes: 200 with deleted_at, file.deleted recorded, then 404 everywhere', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    const deleted = await project.call('DELETE', `/files/${file.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body.deleted_at).toEqual(expect.any(String));
    expect((await eventsOf(file.id)).map((e) => e.type)).toContain('file.deleted');
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['GET', '/download', undefined],
      ['PUT', '/tags', { tags: [] }],
      ['POST', '/metadata', { metadata: {} }],
      ['POST', '/move', { folder_id: null }],
      ['DELETE', '', undefined],
      ['POST', '/confirm', undefined],
    ] as const) {
      const reply = await project.call(method, `/files/${file.id}${path}`, { body });
      expect(reply.status, `${method} ${path}`).toBe(404);
    }
    expect((await project.call('GET', '/files')).body.total).toBe(0);
  });

  it('refuses to delete a held file with 409 LEGAL_HOLD until the hold is released', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    const held = await project.call('PUT', `/files/${file.id}/legal-hold`, {
      body: { reason: 'litigation' },
    });
    expect(held.body.legal_hold).toBe(true);
    const refused = await project.call('DELETE', `/files/${file.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('LEGAL_HOLD');
    expect((await project.call('DELETE', `/files/${file.id}/legal-hold`)).body.legal_hold).toBe(false);
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
  });

  it('releases the hold of a file quarantined while held, so that it can be deleted', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    await project.call('PUT', `/files/${file.id}/legal-hold`, { body: { reason: 'audit' } });
    await coffer.services.db.query("UPDATE files SET status = 'quarantined' WHERE id = $1", [file.id]);
    const stuck = await project.call('DELETE', `/files/${file.id}`);
    expect(stuck.status).toBe(409);
    expect(stuck.body.error.code).toBe('LEGAL_HOLD');
    const released = await project.call('DELETE', `/files/${file.id}/legal-hold`);
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ status: 'quarantined', legal_hold: false });
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
  });

  it('answers 409 CONFLICT on every per-file call of a quarantined file but DELETE', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    await coffer.services.db.query("UPDATE files SET status = 'quarantined' WHERE id = $1", [file.id]);
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['GET', '/download', undefined],
      ['PUT', '/tags', { tags: [] }],
      ['POST', '/tags', { tags: ['x'] }],
      ['PUT', '/metadata', { metadata: {} }],
      ['POST', '/metadata', { metadata: {} }],
      ['POST', '/move', { folder_id: null }],
      ['POST', '/confirm', undefined],
      ['PUT', '/legal-hold', {}],
    ] as const) {
      const reply = await project.call(method, `/files/${file.id}${path}`, { body });
      expect(reply.status, `${method} ${path}`).toBe(409);
      expect(reply.body.error.code).toBe('CONFLICT');
    }
    expect((await project.call('DELETE', `/files/${file.id}`)).status).toBe(200);
  });
});

describe('background collection', () => {
  it('removes the objects of deleted files after the grace period, and fails abandoned uploads', async () => {
    const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0', COFFER_UPLOAD_URL_TTL_SECONDS: '1' });
    try {
      const project = await quick.newProject();
      const { store } = quick.services;
      const file = (await upload(project)).body;
      expect(await store.head(file.storage_key)).toBeDefined();
      await project.call('DELETE', `/files/${file.id}`);

      const abandoned = await initiate(project);
      await put(abandoned.upload_url, abandoned.bytes);
      const abandonedKey = (await project.call('GET', `/files/${abandoned.file_id}`)).body.storage_key;
      await new Promise((resolve) => setTimeout(resolve, 1100));

      await quick.services.collector.sweep();
      expect(await store.head(file.storage_key)).toBeUndefined();
      // Nothing of the abandoned upload's bytes is left to become an object.
      expect(await store.seal(abandonedKey)).toBeUndefined();
      const failed = await project.call('GET', `/files/${abandoned.file_id}`);
      expect(failed.body).toMatchObject({ status: 'failed', failure_reason: 'upload_abandoned' });
    } finally {
      await quick.close();
    }
  });

  it('collects more deleted files in one pass than one statement takes on the embedded engine', async () => {
    const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0' });
    try {
      const project = await quick.newProject();
      const files = [];
      for (let i = 0; i < 25; i++) files.push((await upload(project)).body);
      for (const file of files) await project.call('DELETE', `/files/${file.id}`);

      expect((await quick.services.collector.sweep()).purged).toBe(25);
      for (const file of files) expect(await quick.services.store.head(file.storage_key)).toBeUndefined();
      expect((await quick.services.collector.sweep()).purged).toBe(0);
    } finally {
      await quick.close();
    }
  });

  it('keeps objects during the grace period', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    await project.call('DELETE', `/files/${file.id}`);
    await coffer.services.collector.sweep();
    expect(await coffer.services.store.head(file.storage_key)).toBeDefined();
  });
});
