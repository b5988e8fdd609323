import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eicarTestFile } from '../../src/infra/scanner/index.ts';
import type { SettingsInput } from '../../src/modules/projects/schemas.ts';
import { ADMIN_KEY, type Reply, startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';
import { initiate, put, upload } from '../support/files.ts';
import { freePort } from '../support/net.ts';
import { drain, PNG } from '../support/pipeline.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  // No grace period: a sweep collects at once what it may collect at all.
  coffer = await startCoffer({ COFFER_GC_GRACE_SECONDS: '0', COFFER_METRICS_PORT: String(await freePort()) });
});
afterAll(() => coffer.close());

function expectQuotaExceeded(reply: Reply, details: { quota: number; used: number; requested: number }) {
  expect(reply.status, JSON.stringify(reply.body)).toBe(403);
  expect(reply.body.error.code).toBe('QUOTA_EXCEEDED');
  expect(reply.body.error.details).toEqual(details);
  expect(reply.body.error.request_id).toEqual(expect.any(String));
}

/** An initiate request declaring `size` bytes, none sent. */
const attempt = (project: TestProject, size: number, filename = 'a.bin', token?: string) =>
  project.call('POST', '/files/upload', {
    token,
    body: { filename, content_type: 'application/octet-stream', size_bytes: size },
  });

const usageOf = async (project: TestProject) => {
  const reply = await project.call('GET', '/usage');
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  return reply.body;
};

const none = { files: 0, bytes: 0 };

/** The usage body of a project holding only what `counts` says (by status) and `versions`. */
function usage(
  project: TestProject,
  settings: { max_storage_bytes?: number | null; max_files?: number | null },
  counts: Partial<
    Record<
      'uploading' | 'processing' | 'ready' | 'failed' | 'quarantined' | 'deleted',
      { files: number; bytes: number }
    >
  >,
  versions = { bytes: 0, reserved_bytes: 0 },
) {
  const by = {
    uploading: none,
    processing: none,
    ready: none,
    failed: none,
    quarantined: none,
    deleted: none,
    ...counts,
  };
  return {
    project_id: project.id,
    storage: {
      quota_bytes: settings.max_storage_bytes ?? null,
      used_bytes:
        by.processing.bytes +
        by.ready.bytes +
        by.failed.bytes +
        by.quarantined.bytes +
        by.deleted.bytes +
        versions.bytes,
      reserved_bytes: by.uploading.bytes + versions.reserved_bytes,
    },
    files: {
      quota: settings.max_files ?? null,
      used: by.uploading.files + by.processing.files + by.ready.files + by.deleted.files,
      by_status: by,
    },
    versions,
  };
}

/** Moves a file's or new content's URL lifetime into the past, as if it had run out unused. */
const expireUpload = (table: 'files' | 'pending_contents', id: string) =>
  coffer.services.db.query(
    `UPDATE ${table} SET upload_expires_at = now() - interval '1 hour' WHERE id = $1`,
    [id],
  );

describe('quota settings', () => {
  it('are null (no limit) by default, set and cleared with PATCH', async () => {
    const project = await coffer.newProject();
    const created = await project.call('GET', '');
    expect(created.body.settings).toMatchObject({ max_storage_bytes: null, max_files: null });
    const set = await project.call('PATCH', '', {
      token: ADMIN_KEY,
      body: { settings: { max_storage_bytes: 1000, max_files: 0 } },
    });
    expect(set.status).toBe(200);
    expect(set.body.settings).toMatchObject({ max_storage_bytes: 1000, max_files: 0 });
    const cleared = await project.call('PATCH', '', {
      token: ADMIN_KEY,
      body: { settings: { max_storage_bytes: null } },
    });
    expect(cleared.body.settings).toMatchObject({ max_storage_bytes: null, max_files: 0 });
  });

  it.each(['max_storage_bytes', 'max_files'])(
    "%s is the operator's: the project's own key cannot change it",
    async (name) => {
      const project = await coffer.newProject({ [name]: 10 });
      const raise = await project.call('PATCH', '', { body: { settings: { [name]: 1000 } } });
      expect(raise.status).toBe(403);
      expect(raise.body.error).toMatchObject({
        code: 'INSUFFICIENT_SCOPE',
        details: { field: `settings.${name}`, required_scope: 'admin' },
      });
      // Sending the value it already has changes nothing and is allowed.
      const same = await project.call('PATCH', '', { body: { name: 'Renamed', settings: { [name]: 10 } } });
      expect(same.status).toBe(200);
      expect(same.body.settings[name]).toBe(10);
    },
  );

  it.each([
    [{ max_storage_bytes: -1 }, 422, 'VALIDATION_ERROR', 'settings.max_storage_bytes'],
    [{ max_files: -1 }, 422, 'VALIDATION_ERROR', 'settings.max_files'],
    [{ max_files: 1.5 }, 400, 'BAD_REQUEST', 'settings.max_files'],
    [{ max_storage_bytes: '100' }, 400, 'BAD_REQUEST', 'settings.max_storage_bytes'],
  ])('refuses %j', async (settings, status, code, field) => {
    const project = await coffer.newProject();
    const reply = await project.call('PATCH', '', { body: { settings } });
    expect(reply.status).toBe(status);
    expect(reply.body.error).toMatchObject({ code, details: { field } });
  });
});

describe('max_storage_bytes', () => {
  it('holds under concurrency: 20 simultaneous initiates against a quota that fits 3 give three 201s', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 300 });
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) => attempt(project, 100, `f${i}.bin`)),
    );
    const created = replies.filter((reply) => reply.status === 201);
    expect(created).toHaveLength(3);
    for (const reply of replies.filter((r) => r.status !== 201)) {
      expectQuotaExceeded(reply, { quota: 300, used: 300, requested: 100 });
    }
    const listed = await project.call('GET', '/files');
    expect(listed.body.total).toBe(3);
    expect(await usageOf(project)).toEqual(
      usage(project, { max_storage_bytes: 300 }, { uploading: { files: 3, bytes: 300 } }),
    );
  });

  it('admits an upload that fills the quota exactly and counts confirmed files as used', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 30 });
    const first = await upload(project, { bytes: 'a'.repeat(20) });
    expect(first.body.status).toBe('ready');
    expectQuotaExceeded(await attempt(project, 11), { quota: 30, used: 20, requested: 11 });
    expect((await attempt(project, 10)).status).toBe(201);
    expectQuotaExceeded(await attempt(project, 1), { quota: 30, used: 30, requested: 1 });
    expect(await usageOf(project)).toEqual(
      usage(
        project,
        { max_storage_bytes: 30 },
        { ready: { files: 1, bytes: 20 }, uploading: { files: 1, bytes: 10 } },
      ),
    );
  });

  it('applies to uploads with an upload token, without using a slot of the token', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 10 });
    const token = await project.call('POST', '/upload-tokens', { body: { max_files: 5 } });
    expectQuotaExceeded(await attempt(project, 11, 'a.bin', token.body.token), {
      quota: 10,
      used: 0,
      requested: 11,
    });
    const [row] = await coffer.services.db.query<{ files_used: number }>(
      'SELECT files_used FROM upload_tokens WHERE project_id = $1',
      [project.id],
    );
    expect(row!.files_used).toBe(0);
  });

  it('reserves the total of a multipart upload at start, and releases it on abort', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 1000 });
    const start = (total: number) =>
      project.call('POST', '/files/upload/multipart/start', {
        body: { filename: 'big.bin', content_type: 'application/octet-stream', total_size_bytes: total },
      });
    const session = await start(800);
    expect(session.status).toBe(201);
    expectQuotaExceeded(await start(201), { quota: 1000, used: 800, requested: 201 });
    expectQuotaExceeded(await attempt(project, 201), { quota: 1000, used: 800, requested: 201 });
    expect(await usageOf(project)).toEqual(
      usage(project, { max_storage_bytes: 1000 }, { uploading: { files: 1, bytes: 800 } }),
    );

    const aborted = await project.call('DELETE', `/files/upload/multipart/${session.body.upload_id}`);
    expect(aborted.status).toBe(204);
    // Its parts are gone with the abort: it holds nothing.
    expect(await usageOf(project)).toEqual(usage(project, { max_storage_bytes: 1000 }, {}));
    expect((await start(1000)).status).toBe(201);
  });

  it('converts a completed multipart upload into used bytes', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 100 });
    const bytes = Buffer.from('x'.repeat(60));
    const session = await project.call('POST', '/files/upload/multipart/start', {
      body: { filename: 'big.bin', content_type: 'application/octet-stream', total_size_bytes: bytes.length },
    });
    const { upload_id: uploadId } = session.body;
    const url = await project.call(
      'GET',
      `/files/upload/multipart/${uploadId}/part-url?part=1&size=${bytes.length}`,
    );
    const stored = await fetch(url.body.url, { method: 'PUT', body: bytes });
    expect(stored.status).toBe(200);
    const completed = await project.call('POST', `/files/upload/multipart/${uploadId}/complete`, {
      body: { parts: [{ part_number: 1, etag: stored.headers.get('etag') }] },
    });
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    expect(await usageOf(project)).toEqual(
      usage(project, { max_storage_bytes: 100 }, { ready: { files: 1, bytes: 60 } }),
    );
    expectQuotaExceeded(await attempt(project, 41), { quota: 100, used: 60, requested: 41 });
  });

  it('releases the reservation of an upload that expired unconfirmed, and of an expired multipart upload', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 100 });
    const single = await attempt(project, 60);
    expectQuotaExceeded(await attempt(project, 41), { quota: 100, used: 60, requested: 41 });
    await expireUpload('files', single.body.file_id);
    await coffer.services.collector.sweep();
    // Failed, and collected at once (it has nothing worth keeping).
    expect(await usageOf(project)).toEqual(usage(project, { max_storage_bytes: 100 }, {}));

    const session = await project.call('POST', '/files/upload/multipart/start', {
      body: { filename: 'big.bin', content_type: 'application/octet-stream', total_size_bytes: 100 },
    });
    expect(session.status).toBe(201);
    await coffer.services.db.query(
      `UPDATE multipart_sessions SET expires_at = now() - interval '1 second' WHERE id = $1`,
      [session.body.upload_id],
    );
    await coffer.services.multipart.reap();
    expect(await usageOf(project)).toEqual(usage(project, { max_storage_bytes: 100 }, {}));
    expect((await attempt(project, 100)).status).toBe(201);
  });

  it('counts the bytes of files the pipeline fails or quarantines until they are deleted and collected', async () => {
    const settings = { max_storage_bytes: 1000, virus_scan_enabled: true };
    const project = await coffer.newProject(settings);
    const clean = await upload(project, { filename: 'pixel.png', content_type: 'image/png', bytes: PNG });
    const mismatch = await upload(project, {
      filename: 'fake.png',
      content_type: 'image/png',
      bytes: 'not a png',
    });
    const infected = await upload(project, { filename: 'eicar.txt', bytes: eicarTestFile() });
    const eicarSize = eicarTestFile().length;
    for (const reply of [clean, mismatch, infected]) expect(reply.body.status).toBe('processing');
    expect(await usageOf(project)).toEqual(
      usage(project, settings, { processing: { files: 3, bytes: PNG.length + 9 + eicarSize } }),
    );

    await drain(coffer.services.pipeline);
    expect((await project.call('GET', `/files/${mismatch.body.id}`)).body.status).toBe('failed');
    expect(await usageOf(project)).toEqual(
      usage(project, settings, {
        ready: { files: 1, bytes: PNG.length },
        failed: { files: 1, bytes: 9 },
        quarantined: { files: 1, bytes: eicarSize },
      }),
    );
    // Their objects are still stored: the quota has no room for what they hold.
    expectQuotaExceeded(await attempt(project, 1000 - PNG.length - 8), {
      quota: 1000,
      used: PNG.length + 9 + eicarSize,
      requested: 1000 - PNG.length - 8,
    });
    for (const file of [mismatch, infected]) {
      expect((await project.call('DELETE', `/files/${file.body.id}`)).status).toBe(200);
    }
    expect(await usageOf(project)).toEqual(
      usage(project, settings, {
        ready: { files: 1, bytes: PNG.length },
        deleted: { files: 2, bytes: 9 + eicarSize },
      }),
    );
    await coffer.services.collector.sweep();
    expect(await usageOf(project)).toEqual(
      usage(project, settings, { ready: { files: 1, bytes: PNG.length } }),
    );
  });
});

describe('max_files', () => {
  it('holds under concurrency: 20 simultaneous initiates with max_files 3 give three 201s', async () => {
    const project = await coffer.newProject({ max_files: 3 });
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) => attempt(project, 10, `f${i}.bin`)),
    );
    expect(replies.filter((reply) => reply.status === 201)).toHaveLength(3);
    for (const reply of replies.filter((r) => r.status !== 201)) {
      expectQuotaExceeded(reply, { quota: 3, used: 3, requested: 1 });
    }
    expect((await usageOf(project)).files).toMatchObject({ quota: 3, used: 3 });
  });

  it('counts deleted files until they are collected', async () => {
    const project = await coffer.newProject({ max_files: 1, max_storage_bytes: 11 });
    const file = await upload(project);
    const deleted = await project.call('DELETE', `/files/${file.body.id}`);
    expect(deleted.status).toBe(200);
    const settings = { max_files: 1, max_storage_bytes: 11 };
    expect(await usageOf(project)).toEqual(usage(project, settings, { deleted: { files: 1, bytes: 11 } }));
    expectQuotaExceeded(await attempt(project, 1), { quota: 1, used: 1, requested: 1 });

    await coffer.services.collector.sweep();
    expect(await usageOf(project)).toEqual(usage(project, settings, {}));
    expect((await attempt(project, 11)).status).toBe(201);
  });

  it('does not count failed files, and does not limit new versions of a file', async () => {
    const settings = { max_files: 1, versioning_enabled: true };
    const project = await coffer.newProject(settings);
    const started = await initiate(project);
    await expireUpload('files', started.file_id);
    await coffer.services.collector.sweep();
    const file = await upload(project);
    expect(file.body.status).toBe('ready');
    expectQuotaExceeded(await attempt(project, 1), { quota: 1, used: 1, requested: 1 });
    const version = await project.call('POST', `/files/${file.body.id}/versions`, {
      body: { size_bytes: 3 },
    });
    expect(version.status, JSON.stringify(version.body)).toBe(201);
  });
});

describe('versions', () => {
  const settings = { versioning_enabled: true, max_storage_bytes: 40 };

  async function newVersion(project: TestProject, fileId: string, bytes: string) {
    const started = await project.call('POST', `/files/${fileId}/versions`, {
      body: { size_bytes: bytes.length },
    });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    return started.body as { version_id: string; upload_url: string };
  }

  it('reserve their declared size, then count every earlier version once, across restores', async () => {
    const project = await coffer.newProject(settings);
    const file = (await upload(project, { bytes: 'a'.repeat(11) })).body;
    const second = await newVersion(project, file.id, 'b'.repeat(20));
    expect(await usageOf(project)).toEqual(
      usage(project, settings, { ready: { files: 1, bytes: 11 } }, { bytes: 0, reserved_bytes: 20 }),
    );
    expectQuotaExceeded(
      await project.call('POST', `/files/${file.id}/versions`, { body: { size_bytes: 10 } }),
      { quota: 40, used: 31, requested: 10 },
    );

    expect((await put(second.upload_url, 'b'.repeat(20))).status).toBe(200);
    const confirmed = await project.call('POST', `/files/${file.id}/versions/${second.version_id}/confirm`);
    expect(confirmed.body.status).toBe('committed');
    const afterUpload = usage(
      project,
      settings,
      { ready: { files: 1, bytes: 20 } },
      { bytes: 11, reserved_bytes: 0 },
    );
    expect(await usageOf(project)).toEqual(afterUpload);
    expectQuotaExceeded(await attempt(project, 10), { quota: 40, used: 31, requested: 10 });

    // Restoring the first content makes it current again: the same two objects are held.
    const versions = (await project.call('GET', `/files/${file.id}/versions`)).body.items;
    const first = versions.find((v: { size_bytes: number }) => v.size_bytes === 11);
    const restored = await project.call('POST', `/files/${file.id}/versions/${first.id}/restore`);
    expect(restored.status).toBe(200);
    expect(await usageOf(project)).toEqual(
      usage(project, settings, { ready: { files: 1, bytes: 11 } }, { bytes: 20, reserved_bytes: 0 }),
    );
    await project.call('POST', `/files/${file.id}/versions/${second.version_id}/restore`);
    expect(await usageOf(project)).toEqual(afterUpload);

    // A deleted file keeps its versions counted until it is collected.
    await project.call('DELETE', `/files/${file.id}`);
    expect(await usageOf(project)).toEqual(
      usage(project, settings, { deleted: { files: 1, bytes: 20 } }, { bytes: 11, reserved_bytes: 0 }),
    );
    await coffer.services.collector.sweep();
    expect(await usageOf(project)).toEqual(usage(project, settings, {}));
  });

  it('release new content that expired, or that the pipeline rejected', async () => {
    const scanned = { versioning_enabled: true, virus_scan_enabled: true, max_storage_bytes: 1000 };
    const project = await coffer.newProject(scanned);
    const file = (await upload(project, { filename: 'pixel.png', content_type: 'image/png', bytes: PNG }))
      .body;
    await drain(coffer.services.pipeline);
    const abandoned = await newVersion(project, file.id, 'x'.repeat(5));
    await expireUpload('pending_contents', abandoned.version_id);
    await coffer.services.collector.sweep();
    expect(await usageOf(project)).toEqual(
      usage(project, scanned, { ready: { files: 1, bytes: PNG.length } }),
    );

    const infected = eicarTestFile().toString();
    const rejected = await newVersion(project, file.id, infected);
    expect((await put(rejected.upload_url, infected, 'image/png')).status).toBe(200);
    const confirmed = await project.call('POST', `/files/${file.id}/versions/${rejected.version_id}/confirm`);
    expect(confirmed.body.status).toBe('processing');
    expect(await usageOf(project)).toEqual(
      usage(
        project,
        scanned,
        { ready: { files: 1, bytes: PNG.length } },
        { bytes: infected.length, reserved_bytes: 0 },
      ),
    );
    await drain(coffer.services.pipeline);
    expect(await usageOf(project)).toEqual(
      usage(project, scanned, { ready: { files: 1, bytes: PNG.length } }),
    );
  });
});

describe('GET /usage', () => {
  it('answers with projects:read only, and 404 for another project', async () => {
    const reader = await coffer.newProject({}, ['projects:read']);
    expect((await reader.call('GET', '/usage')).status).toBe(200);
    const writer = await coffer.newProject({}, ['files:upload']);
    const refused = await writer.call('GET', '/usage');
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('INSUFFICIENT_SCOPE');
    const stranger = await coffer.newProject({}, ['projects:read']);
    const other = await coffer.call('GET', `/v1/projects/${reader.id}/usage`, { token: stranger.key });
    expect(other.status).toBe(404);
  });

  it('is exact after a mix of uploads, confirms, deletes and failures', async () => {
    const settings: SettingsInput = { max_storage_bytes: 10_000, max_files: 10 };
    const project = await coffer.newProject(settings);
    await upload(project, { bytes: 'a'.repeat(100) });
    await upload(project, { bytes: 'b'.repeat(200) });
    const doomed = await upload(project, { bytes: 'c'.repeat(300) });
    await initiate(project, { bytes: 'd'.repeat(400) });
    const expired = await initiate(project, { bytes: 'e'.repeat(500) });
    await project.call('DELETE', `/files/${doomed.body.id}`);
    await expireUpload('files', expired.file_id);
    // Deleted in the future, as if within the grace period: counted as deleted, not collected yet.
    const graceful = await upload(project, { bytes: 'f'.repeat(50) });
    expect((await project.call('DELETE', `/files/${graceful.body.id}`)).status).toBe(200);

    await coffer.services.db.query(`UPDATE files SET deleted_at = now() + interval '1 hour' WHERE id = $1`, [
      graceful.body.id,
    ]);
    await coffer.services.collector.sweep();
    expect(await usageOf(project)).toEqual(
      usage(project, settings, {
        ready: { files: 2, bytes: 300 },
        uploading: { files: 1, bytes: 400 },
        deleted: { files: 1, bytes: 50 },
      }),
    );
  });
});

describe('the OpenAPI document', () => {
  it('describes the usage endpoint, the quota settings and QUOTA_EXCEEDED', async () => {
    const document = (await coffer.call('GET', '/openapi.json')).body;
    const operation = document.paths['/v1/projects/{project_id}/usage'].get;
    expect(operation.operationId).toBe('getProjectUsage');
    expect(operation.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ProjectUsage',
    });
    const { schemas } = document.components;
    expect(Object.keys(schemas.ProjectUsage.properties)).toEqual([
      'project_id',
      'storage',
      'files',
      'versions',
    ]);
    for (const name of ['ProjectSettingsInput', 'ProjectSettings']) {
      expect(schemas[name].properties).toHaveProperty('max_storage_bytes');
      expect(schemas[name].properties).toHaveProperty('max_files');
    }
    expect(schemas.Error.properties.error.properties.code.enum).toContain('QUOTA_EXCEEDED');
  });
});

describe('reconcile', () => {
  it('corrects drift, reports it in a metric, and finds none once corrected', async () => {
    const project = await coffer.newProject({ max_storage_bytes: 1000 });
    await upload(project, { bytes: 'a'.repeat(100) });
    await initiate(project, { bytes: 'b'.repeat(50) });
    const expected = await usageOf(project);
    // Every other project of this file is consistent, whatever its tests did.
    expect(await coffer.services.usage.reconcile()).toEqual({ projects: 0, files: 0, bytes: 0 });

    await coffer.services.db.query(
      `UPDATE project_usage SET ready_bytes = ready_bytes + 700, uploading_files = uploading_files - 1,
         versions_bytes = versions_bytes - 5 WHERE project_id = $1`,
      [project.id],
    );
    expect((await usageOf(project)).storage.used_bytes).toBe(795);
    expectQuotaExceeded(await attempt(project, 300), { quota: 1000, used: 845, requested: 300 });

    expect(await coffer.services.usage.reconcile()).toEqual({ projects: 1, files: 1, bytes: 705 });
    expect(await usageOf(project)).toEqual(expected);
    expect((await attempt(project, 300)).status).toBe(201);
    expect(await coffer.services.usage.reconcile()).toEqual({ projects: 0, files: 0, bytes: 0 });

    const metric = await coffer.services.metrics!.usageDrift.get();
    const total = (unit: string) => metric.values.find((value) => value.labels.unit === unit)?.value;
    expect(total('bytes')).toBe(705);
    expect(total('files')).toBe(1);
  });

  it('keeps the numbers of changes as deltas, and folding them changes nothing of what is reported', async () => {
    const project = await coffer.newProject();
    await upload(project, { bytes: 'a'.repeat(10) });
    await upload(project, { bytes: 'b'.repeat(20) });
    const before = await usageOf(project);
    expect(before.storage.used_bytes).toBe(30);
    const deltas = () =>
      coffer.services.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM project_usage_deltas WHERE project_id = $1',
        [project.id],
      );
    expect((await deltas())[0]!.n).toBeGreaterThan(0);
    expect(await coffer.services.usage.fold()).toBeGreaterThan(0);
    expect((await deltas())[0]!.n).toBe(0);
    expect(await usageOf(project)).toEqual(before);
  });

  it('rebuilds the numbers of a project whose row is missing', async () => {
    const project = await coffer.newProject();
    await upload(project, { bytes: 'a'.repeat(42) });
    const expected = await usageOf(project);
    await coffer.services.usage.fold(); // the numbers are all in the row, then the row goes
    await coffer.services.db.query('DELETE FROM project_usage WHERE project_id = $1', [project.id]);
    expect((await usageOf(project)).storage.used_bytes).toBe(0);
    expect((await coffer.services.usage.reconcile()).projects).toBe(1);
    expect(await usageOf(project)).toEqual(expected);
  });
});
