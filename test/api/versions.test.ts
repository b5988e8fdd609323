import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eicarTestFile } from '../../src/infra/scanner/index.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { put, upload } from '../support/files.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

async function download(project: TestProject, path: string): Promise<string> {
  const reply = await project.call('GET', path);
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  return (await fetch(reply.body.url)).text();
}

/** Uploads new content for a file and confirms it; returns the confirm reply. */
async function replaceContent(
  project: TestProject,
  fileId: string,
  bytes: string | Buffer,
  contentType = 'text/plain',
) {
  const started = await project.call('POST', `/files/${fileId}/versions`, {
    body: { size_bytes: Buffer.byteLength(bytes), content_type: contentType },
  });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  expect((await put(started.body.upload_url, bytes, contentType)).status).toBe(200);
  return project.call('POST', `/files/${fileId}/versions/${started.body.version_id}/confirm`);
}

const versionsOf = async (project: TestProject, fileId: string) =>
  (await project.call('GET', `/files/${fileId}/versions`)).body;

describe('file versions', () => {
  it('records the first upload as version 1', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const file = (await upload(project, { bytes: 'v1' })).body;
    const list = await versionsOf(project, file.id);
    expect(list.total).toBe(1);
    expect(list.items[0]).toEqual({
      id: expect.stringMatching(/^ver_[0-9A-Z]{26}$/),
      file_id: file.id,
      version_number: 1,
      storage_key: file.storage_key,
      size_bytes: 2,
      content_type: 'text/plain',
      checksum_sha256: file.checksum_sha256,
      reason: 'upload',
      source_version_id: null,
      created_at: expect.any(String),
    });
  });

  it('serves the current content until new content is confirmed, then makes it a version', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const file = (await upload(project, { bytes: 'first' })).body;
    const started = await project.call('POST', `/files/${file.id}/versions`, { body: { size_bytes: 6 } });
    expect(started.status).toBe(201);
    await put(started.body.upload_url, 'second');
    expect(await download(project, `/files/${file.id}/download`)).toBe('first');

    const confirmed = await project.call(
      'POST',
      `/files/${file.id}/versions/${started.body.version_id}/confirm`,
    );
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toMatchObject({ version_id: started.body.version_id, status: 'committed' });
    expect(confirmed.body.file).toMatchObject({ status: 'ready', size_bytes: 6 });
    expect(await download(project, `/files/${file.id}/download`)).toBe('second');

    const list = await versionsOf(project, file.id);
    expect(
      list.items.map((v: { version_number: number; reason: string }) => [v.version_number, v.reason]),
    ).toEqual([
      [2, 'upload'],
      [1, 'upload'],
    ]);
    expect(list.items[0].id).toBe(started.body.version_id);
    const again = await project.call('POST', `/files/${file.id}/versions/${started.body.version_id}/confirm`);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('INVALID_STATE');
  });

  it('refuses with 409 CONFLICT the confirm of new content a newer confirmed one overtook', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const file = (await upload(project, { bytes: 'first' })).body;
    const declare = async (bytes: string) => {
      const started = await project.call('POST', `/files/${file.id}/versions`, {
        body: { size_bytes: bytes.length, content_type: 'text/plain' },
      });
      expect((await put(started.body.upload_url, bytes)).status).toBe(200);
      return started.body.version_id as string;
    };
    const confirm = (versionId: string) =>
      project.call('POST', `/files/${file.id}/versions/${versionId}/confirm`);
    const older = await declare('older');
    const newer = await declare('newer');
    expect((await confirm(newer)).body).toMatchObject({ version_id: newer, status: 'committed' });

    const late = await confirm(older);
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({
      code: 'CONFLICT',
      message: expect.stringContaining('newer content'),
      details: { version_id: older },
      request_id: expect.any(String),
    });
    expect(await download(project, `/files/${file.id}/download`)).toBe('newer');
    const ids = (await versionsOf(project, file.id)).items.map((v: { id: string }) => v.id);
    expect(ids).toHaveLength(2);
    expect(ids).not.toContain(older);
    // Not kept: it failed, and its object is collected as that of rejected content.
    const [content] = await coffer.services.db.query(
      'SELECT status, failure_reason FROM pending_contents WHERE id = $1',
      [older],
    );
    expect(content).toEqual({ status: 'failed', failure_reason: 'superseded' });
    expect((await confirm(older)).body.error.code).toBe('INVALID_STATE');
  });

  it('downloads old versions, restores them, and restores a restore', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const file = (await upload(project, { bytes: 'one' })).body;
    await replaceContent(project, file.id, 'two!');
    const [v2, v1] = (await versionsOf(project, file.id)).items;
    expect(await download(project, `/files/${file.id}/versions/${v1.id}/download`)).toBe('one');
    expect(await download(project, `/files/${file.id}/versions/${v2.id}/download`)).toBe('two!');

    const restored = await project.call('POST', `/files/${file.id}/versions/${v1.id}/restore`);
    expect(restored.status).toBe(200);
    expect(restored.body).toMatchObject({
      status: 'ready',
      storage_key: v1.storage_key,
      size_bytes: 3,
      content_type: 'text/plain',
    });
    expect(await download(project, `/files/${file.id}/download`)).toBe('one');
    const v3 = (await versionsOf(project, file.id)).items[0];
    expect(v3).toMatchObject({
      version_number: 3,
      reason: 'restore',
      source_version_id: v1.id,
      storage_key: v1.storage_key,
    });

    const again = await project.call('POST', `/files/${file.id}/versions/${v3.id}/restore`);
    expect(again.status).toBe(200);
    const v4 = (await versionsOf(project, file.id)).items[0];
    expect(v4).toMatchObject({
      version_number: 4,
      reason: 'restore',
      source_version_id: v3.id,
      storage_key: v1.storage_key,
    });
    await project.call('POST', `/files/${file.id}/versions/${v2.id}/restore`);
    expect(await download(project, `/files/${file.id}/download`)).toBe('two!');
    // Every object any version refers to is still there.
    for (const version of (await versionsOf(project, file.id)).items) {
      expect(await coffer.services.store.head(version.storage_key)).toBeDefined();
    }
  });

  it('restores a different content type and keeps the status', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const file = (await upload(project, { filename: 'data', content_type: 'text/plain', bytes: 'a' })).body;
    await replaceContent(project, file.id, '{"a":1}', 'application/json');
    expect((await project.call('GET', `/files/${file.id}`)).body).toMatchObject({
      content_type: 'application/json',
      category: 'document',
    });
    const v1 = (await versionsOf(project, file.id)).items[1];
    const restored = await project.call('POST', `/files/${file.id}/versions/${v1.id}/restore`);
    expect(restored.body).toMatchObject({ content_type: 'text/plain', size_bytes: 1, status: 'ready' });
  });

  it('applies the download TTL rules to versions', async () => {
    const project = await coffer.newProject({ versioning_enabled: true, signed_url_ttl_seconds: 300 });
    const file = (await upload(project)).body;
    const [v1] = (await versionsOf(project, file.id)).items;
    const seconds = async (query: string) => {
      const reply = await project.call('GET', `/files/${file.id}/versions/${v1.id}/download${query}`);
      return Math.round((new Date(reply.body.expires_at).getTime() - Date.now()) / 1000);
    };
    expect(await seconds('')).toBe(300);
    expect(await seconds('?ttl=90')).toBe(90);
    const short = await project.call('GET', `/files/${file.id}/versions/${v1.id}/download?ttl=30`);
    expect(short.status).toBe(422);
    expect(short.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'ttl' } });
    await project.call('PATCH', '', { body: { settings: { require_signed_urls: true } } });
    expect(await seconds('?ttl=90')).toBe(300);
    expect(await seconds('?ttl=30')).toBe(300);
  });

  it('answers 404 for an unknown version or one of another file', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const a = (await upload(project)).body;
    const b = (await upload(project)).body;
    const [bVersion] = (await versionsOf(project, b.id)).items;
    for (const path of [
      `/files/${a.id}/versions/${bVersion.id}/restore`,
      `/files/${a.id}/versions/ver_01ARZ3NDEKTSV4RRFFQ69G5FAV/restore`,
    ]) {
      const reply = await project.call('POST', path);
      expect(reply.status).toBe(404);
      expect(reply.body.error.code).toBe('NOT_FOUND');
    }
    expect((await project.call('GET', `/files/${a.id}/versions/${bVersion.id}/download`)).status).toBe(404);
  });

  it('refuses version endpoints with 409 VERSIONING_DISABLED, and works again when turned back on', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const file = (await upload(project, { bytes: 'one' })).body;
    const [v1] = (await versionsOf(project, file.id)).items;
    await project.call('PATCH', '', { body: { settings: { versioning_enabled: false } } });
    for (const [method, path, body] of [
      ['GET', `/files/${file.id}/versions`, undefined],
      ['GET', `/files/${file.id}/versions/${v1.id}/download`, undefined],
      ['POST', `/files/${file.id}/versions/${v1.id}/restore`, undefined],
      ['POST', `/files/${file.id}/versions`, { size_bytes: 1 }],
    ] as const) {
      const reply = await project.call(method, path, { body });
      expect(reply.status, path).toBe(409);
      expect(reply.body.error.code).toBe('VERSIONING_DISABLED');
    }
    // Uploads while versioning is off record no version.
    const unversioned = (await upload(project, { bytes: 'plain' })).body;
    await project.call('PATCH', '', { body: { settings: { versioning_enabled: true } } });
    expect((await versionsOf(project, file.id)).items.map((v: { id: string }) => v.id)).toEqual([v1.id]);
    expect((await versionsOf(project, unversioned.id)).total).toBe(0);
    // New content for it keeps the earlier bytes restorable.
    await replaceContent(project, unversioned.id, 'newer');
    const list = (await versionsOf(project, unversioned.id)).items;
    expect(list.map((v: { version_number: number }) => v.version_number)).toEqual([2, 1]);
    expect(await download(project, `/files/${unversioned.id}/versions/${list[1].id}/download`)).toBe('plain');
  });

  it('refuses restore of a deleted (404) or quarantined (409) file', async () => {
    const project = await coffer.newProject({ versioning_enabled: true });
    const deleted = (await upload(project)).body;
    const [dv] = (await versionsOf(project, deleted.id)).items;
    await project.call('DELETE', `/files/${deleted.id}`);
    expect((await project.call('POST', `/files/${deleted.id}/versions/${dv.id}/restore`)).status).toBe(404);

    const held = (await upload(project)).body;
    const [hv] = (await versionsOf(project, held.id)).items;
    await coffer.services.db.query("UPDATE files SET status = 'quarantined' WHERE id = $1", [held.id]);
    const reply = await project.call('POST', `/files/${held.id}/versions/${hv.id}/restore`);
    expect(reply.status).toBe(409);
    expect(reply.body.error.code).toBe('CONFLICT');
  });

  it('applies the project checks to new content', async () => {
    const project = await coffer.newProject({ versioning_enabled: true, max_file_size_bytes: 10 });
    const file = (await upload(project, { filename: 'a.txt', bytes: 'x' })).body;
    const big = await project.call('POST', `/files/${file.id}/versions`, { body: { size_bytes: 11 } });
    expect(big.status).toBe(413);
    const wrong = await project.call('POST', `/files/${file.id}/versions`, {
      body: { size_bytes: 1, content_type: 'image/png' },
    });
    expect(wrong.status).toBe(422);
    const pending = await project.call('POST', '/files/upload', {
      body: { filename: 'b.txt', content_type: 'text/plain', size_bytes: 1 },
    });
    const notReady = await project.call('POST', `/files/${pending.body.file_id}/versions`, {
      body: { size_bytes: 1 },
    });
    expect(notReady.status).toBe(409);
    expect(notReady.body.error.code).toBe('INVALID_STATE');
  });
});

describe('checksums on a store that does not hash uploads', () => {
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const runJobs = async () => {
    while ((await coffer.services.pipeline.runOnce()) > 0);
  };

  /** Runs `work` with a store that seals without a SHA-256, as S3 does: digest jobs compute it later. */
  async function unhashed(work: () => Promise<void>): Promise<void> {
    const store = coffer.services.store;
    const { seal } = store;
    store.seal = async (key) => {
      const object = await seal.call(store, key);
      return object && { size: object.size, etag: object.etag };
    };
    try {
      await work();
    } finally {
      store.seal = seal;
    }
  }

  it('computes the checksum of every version, even when new content came before the digest ran', () =>
    unhashed(async () => {
      const project = await coffer.newProject({ versioning_enabled: true });
      const file = (await upload(project, { bytes: 'version one' })).body;
      expect(file.checksum_sha256).toBeNull();
      expect((await replaceContent(project, file.id, 'version two!')).status).toBe(200);
      await runJobs();
      const [v2, v1] = (await versionsOf(project, file.id)).items;
      expect(v1.checksum_sha256).toBe(sha256('version one'));
      expect(v2.checksum_sha256).toBe(sha256('version two!'));
      expect((await project.call('GET', `/files/${file.id}`)).body.checksum_sha256).toBe(
        sha256('version two!'),
      );

      const restored = await project.call('POST', `/files/${file.id}/versions/${v1.id}/restore`);
      expect(restored.status).toBe(200);
      await runJobs();
      expect((await project.call('GET', `/files/${file.id}`)).body.checksum_sha256).toBe(
        sha256('version one'),
      );
    }));

  it('drops the digest of an object collected before it ran', () =>
    unhashed(async () => {
      const { db, store } = coffer.services;
      const project = await coffer.newProject();
      const file = (await upload(project, { bytes: 'gone soon' })).body;
      // Its object collected before the digest ran (as a retired one is, after the grace period).
      await store.delete(file.storage_key);
      await runJobs();
      const digests = await db.query(`SELECT attempts FROM jobs WHERE kind = 'digest' AND file_id = $1`, [
        file.id,
      ]);
      expect(digests).toEqual([]);
    }));

  it('reads a version without checksum again when it is restored', () =>
    unhashed(async () => {
      const project = await coffer.newProject({ versioning_enabled: true });
      const file = (await upload(project, { bytes: 'version one' })).body;
      await replaceContent(project, file.id, 'version two!');
      await runJobs();
      const [, v1] = (await versionsOf(project, file.id)).items;
      // Its digest gave up (the store failed every attempt): the version has no checksum.
      await coffer.services.db.query('UPDATE file_versions SET checksum_sha256 = NULL WHERE id = $1', [
        v1.id,
      ]);

      const restored = await project.call('POST', `/files/${file.id}/versions/${v1.id}/restore`);
      expect(restored.status).toBe(200);
      expect(restored.body.checksum_sha256).toBeNull();
      await runJobs();
      expect((await project.call('GET', `/files/${file.id}`)).body.checksum_sha256).toBe(
        sha256('version one'),
      );
      const [v3, , again] = (await versionsOf(project, file.id)).items;
      expect(v3).toMatchObject({ reason: 'restore', checksum_sha256: sha256('version one') });
      expect(again).toMatchObject({ id: v1.id, checksum_sha256: sha256('version one') });
    }));
});

describe('new content with scanning on', () => {
  it('keeps the old content until the scan passes, and never swaps in infected bytes', async () => {
    const project = await coffer.newProject({ versioning_enabled: true, virus_scan_enabled: true });
    const initial = await upload(project, { bytes: 'clean one' });
    await coffer.services.pipeline.runOnce();
    const fileId = initial.body.id;
    expect((await project.call('GET', `/files/${fileId}`)).body.status).toBe('ready');

    const confirmed = await replaceContent(project, fileId, 'clean two');
    expect(confirmed.body.status).toBe('processing');
    expect(await download(project, `/files/${fileId}/download`)).toBe('clean one');
    while ((await coffer.services.pipeline.runOnce()) > 0);
    expect(await download(project, `/files/${fileId}/download`)).toBe('clean two');

    const infected = await replaceContent(project, fileId, eicarTestFile());
    expect(infected.body.status).toBe('processing');
    while ((await coffer.services.pipeline.runOnce()) > 0);
    const file = (await project.call('GET', `/files/${fileId}`)).body;
    expect(file.status).toBe('ready');
    expect(await download(project, `/files/${fileId}/download`)).toBe('clean two');
    expect(
      (await versionsOf(project, fileId)).items.map((v: { version_number: number }) => v.version_number),
    ).toEqual([2, 1]);
    const [content] = await coffer.services.db.query<{ status: string; scan_signature: string }>(
      'SELECT status, scan_signature FROM pending_contents WHERE id = $1',
      [infected.body.version_id],
    );
    expect(content).toMatchObject({ status: 'quarantined', scan_signature: expect.stringMatching(/^Eicar/) });
  });

  it('refuses with 409 CONFLICT, before any scan, the confirm of new content a newer one overtook', async () => {
    const project = await coffer.newProject({ versioning_enabled: true, virus_scan_enabled: true });
    const fileId = (await upload(project, { bytes: 'clean one' })).body.id;
    while ((await coffer.services.pipeline.runOnce()) > 0);
    const declare = async (bytes: string) => {
      const started = await project.call('POST', `/files/${fileId}/versions`, {
        body: { size_bytes: bytes.length, content_type: 'text/plain' },
      });
      await put(started.body.upload_url, bytes);
      return started.body.version_id as string;
    };
    const confirm = (versionId: string) =>
      project.call('POST', `/files/${fileId}/versions/${versionId}/confirm`);
    const older = await declare('older');
    const newer = await declare('newer');
    expect((await confirm(newer)).body.status).toBe('processing');
    while ((await coffer.services.pipeline.runOnce()) > 0);

    const late = await confirm(older);
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: 'CONFLICT', details: { version_id: older } });
    expect(await coffer.services.db.query('SELECT 1 FROM jobs WHERE content_id = $1', [older])).toEqual([]);
    expect(await download(project, `/files/${fileId}/download`)).toBe('newer');
  });

  it('fails (superseded) new content whose scan passed after a newer one was committed', async () => {
    const { db, pipeline } = coffer.services;
    const project = await coffer.newProject({ versioning_enabled: true, virus_scan_enabled: true });
    const fileId = (await upload(project, { bytes: 'clean one' })).body.id;
    while ((await pipeline.runOnce()) > 0);
    const older = (await replaceContent(project, fileId, 'older')).body.version_id as string;
    const newer = (await replaceContent(project, fileId, 'newer')).body.version_id as string;
    // The newer content's scan ends first: the older one's waits.
    await db.query(`UPDATE jobs SET run_at = now() + interval '1 hour' WHERE content_id = $1`, [older]);
    while ((await pipeline.runOnce()) > 0);
    expect(await download(project, `/files/${fileId}/download`)).toBe('newer');
    await db.query('UPDATE jobs SET run_at = now() WHERE content_id = $1', [older]);
    while ((await pipeline.runOnce()) > 0);

    expect(await download(project, `/files/${fileId}/download`)).toBe('newer');
    const contents = await db.query<{ id: string; status: string; failure_reason: string | null }>(
      'SELECT id, status, failure_reason FROM pending_contents WHERE id = ANY($1::text[])',
      [[older, newer]],
    );
    expect(Object.fromEntries(contents.map(({ id, ...rest }) => [id, rest]))).toEqual({
      [older]: { status: 'failed', failure_reason: 'superseded' },
      [newer]: { status: 'committed', failure_reason: null },
    });
    const ids = (await versionsOf(project, fileId)).items.map((v: { id: string }) => v.id);
    expect(ids).toContain(newer);
    expect(ids).not.toContain(older);
  });
});

describe('version downloads of files that are not ready', () => {
  it('answers 409 INVALID_STATE while the file is processing, and once it failed', async () => {
    const project = await coffer.newProject({ versioning_enabled: true, virus_scan_enabled: true });
    const pending = await upload(project, { filename: 'eicar.txt', bytes: eicarTestFile() });
    const mismatch = await upload(project, {
      filename: 'pixel.png',
      content_type: 'image/png',
      bytes: '<!doctype html><html><body>hi</body></html>',
    });
    expect([pending.body.status, mismatch.body.status]).toEqual(['processing', 'processing']);
    const refusal = async (fileId: string) => {
      const [version] = (await versionsOf(project, fileId)).items;
      const reply = await project.call('GET', `/files/${fileId}/versions/${version.id}/download`);
      expect(reply.status).toBe(409);
      expect(reply.body.error.code).toBe('INVALID_STATE');
    };
    await refusal(pending.body.id);
    await refusal(mismatch.body.id);
    while ((await coffer.services.pipeline.runOnce()) > 0);
    expect((await project.call('GET', `/files/${mismatch.body.id}`)).body.status).toBe('failed');
    await refusal(mismatch.body.id);
  });
});

describe('collection of versioned files', () => {
  it('removes every version object of a deleted file after the grace period', async () => {
    const quick = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0' });
    try {
      const project = await quick.newProject({ versioning_enabled: true });
      const file = (await upload(project, { bytes: 'one' })).body;
      await replaceContent(project, file.id, 'two');
      const keys = (await versionsOf(project, file.id)).items.map(
        (v: { storage_key: string }) => v.storage_key,
      );
      expect(new Set(keys).size).toBe(2);
      const { store } = quick.services;
      await quick.services.collector.sweep();
      for (const key of keys) expect(await store.head(key)).toBeDefined();
      await project.call('DELETE', `/files/${file.id}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      await quick.services.collector.sweep();
      for (const key of keys) expect(await store.head(key)).toBeUndefined();
    } finally {
      await quick.close();
    }
  });
});
