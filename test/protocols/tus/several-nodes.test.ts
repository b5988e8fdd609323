import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tus from 'tus-js-client';
import { describe, expect, it } from 'vitest';
import { findFile } from '../../../src/modules/files/repo.ts';
import { findSessionAndFile, grantOpenPart } from '../../../src/modules/uploads/session-repo.ts';
import { findUploadWithSession, type TusUploadRow } from '../../../src/protocols/tus/upload-repo.ts';
import { storage } from '../../support/backends.ts';
import { cofferForSuite, request, startCoffer } from '../../support/coffer.ts';
import {
  auth,
  b64,
  MiB,
  offsetStream,
  tusEndpointSuite,
  tusHeaders,
  upload,
} from '../../support/tus-endpoint.ts';

// Two servers on one database and one object store: any node resumes any upload, a restarted one too;
// of two PATCHes at one offset from two nodes one wins, and a PATCH stalled on one lets go for another.
const shared = { COFFER_DATA_DIR: mkdtempSync(join(tmpdir(), 'coffer-tus-')) };
const { a, project, expectStored, fileIdOf, patchAt, created, offsetOf } = tusEndpointSuite(shared);
const b = cofferForSuite(shared);

describe('tus 1.0 endpoint', () => {
  it('resumes on another node an upload cut mid-way, in parts and a leftover below 5 MiB', async () => {
    const data = randomBytes(13 * MiB + 123);
    const chunkSize = 2 * MiB;
    let url = '';
    await new Promise<void>((resolve, reject) => {
      const run: tus.Upload = new tus.Upload(data, {
        endpoint: `${a.url}/tus`,
        headers: auth(project.key),
        chunkSize,
        retryDelays: [],
        metadata: { filename: 'big.bin', filetype: 'application/octet-stream' },
        onChunkComplete: (_chunk, sent) => {
          if (sent >= 7 * MiB) {
            url = run.url!;
            void run.abort().then(resolve, reject);
          }
        },
        onSuccess: () => reject(new Error('not cut')),
        onError: reject,
      });
      run.start();
    });
    const path = new URL(url).pathname;
    const cut = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
    expect(cut.status).toBe(200);
    // Whole chunks only: the client's abort may have let one more chunk through, never a piece of one.
    const offset = Number(cut.headers.get('upload-offset'));
    expect(offset % chunkSize).toBe(0);
    expect(offset).toBeGreaterThanOrEqual(8 * MiB);
    expect(offset).toBeLessThan(data.length);
    expect(cut.headers.get('upload-length')).toBe(String(data.length));
    expect(Date.parse(cut.headers.get('upload-expires')!)).toBeGreaterThan(Date.now());

    // A PATCH at a stale offset changes nothing.
    const stale = await request(`${b.url}${path}`, 'PATCH', {
      headers: tusHeaders(project.key, {
        'upload-offset': String(MiB),
        'content-type': 'application/offset+octet-stream',
      }),
      body: Buffer.from('x'),
    });
    expect(stale.status).toBe(409);

    await upload(data, { uploadUrl: `${b.url}${path}`, headers: auth(project.key), chunkSize });
    await expectStored(await fileIdOf(`${b.url}${path}`), data);
  });

  describe('tus uploads written from several nodes', () => {
    /** A PATCH at offset 0 announcing `size` bytes, whose body the test writes (or not) itself. */
    const openPatch = (path: string, size: number) =>
      httpRequest(`${a.url}${path}`, {
        method: 'PATCH',
        headers: {
          ...tusHeaders(project.key, { ...offsetStream, 'upload-offset': '0' }),
          'content-length': String(size),
        },
      });

    it('completes with the right SHA-256 an upload whose server restarted between PATCHes', async () => {
      const data = randomBytes(12 * MiB + 5);
      const { path, fileId } = await created(data.length);
      const before = await startCoffer(shared);
      try {
        expect((await patchAt(before, path, 0, data.subarray(0, 6 * MiB))).status).toBe(204);
      } finally {
        await before.close();
      }
      // A new process: nothing of the upload in memory, its first part only on disk.
      const after = await startCoffer(shared);
      try {
        expect((await patchAt(after, path, 6 * MiB, data.subarray(6 * MiB, 12 * MiB))).status).toBe(204);
        expect((await patchAt(after, path, 12 * MiB, data.subarray(12 * MiB))).status).toBe(204);
      } finally {
        await after.close();
      }
      await expectStored(fileId, data);
    });

    it('keeps the whole parts of a long PATCH whose connection drops, and the bytes after them', async () => {
      const size = 40 * MiB;
      const { path, fileId } = await created(size);
      const data = randomBytes(size);
      const cut = openPatch(path, size);
      cut.on('error', () => undefined);
      await new Promise<void>((resolve) => cut.write(data.subarray(0, 36 * MiB), () => resolve()));
      // The server has read what it was sent (it stores parts of 16 MiB as they fill): then the client goes.
      let offset = 0;
      for (let tries = 0; tries < 100 && offset < 32 * MiB; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        offset = await offsetOf(`${b.url}${path}`);
      }
      expect(offset).toBe(32 * MiB);
      cut.destroy();
      const offsetOnB = () => offsetOf(`${b.url}${path}`);
      // What reached the server of the third part is kept too.
      await expect.poll(offsetOnB, { timeout: 20_000, interval: 100 }).toBeGreaterThan(32 * MiB);
      offset = await offsetOnB();
      expect(offset).toBeLessThanOrEqual(36 * MiB);
      const rest = await patchAt(b, path, offset, data.subarray(offset));
      expect(rest.status, JSON.stringify(rest.body)).toBe(204);
      await expectStored(fileId, data);
    });

    it('lets one of two PATCHes at the same offset win, the other refused', async () => {
      const half = 6 * MiB;
      const { path, fileId } = await created(2 * half);
      const first = randomBytes(half);
      const second = randomBytes(half);
      const replies = await Promise.all([patchAt(a, path, 0, first), patchAt(b, path, 0, second)]);
      const statuses = replies.map((reply) => reply.status);
      expect(statuses.filter((status) => status === 204)).toHaveLength(1);
      expect([409, 423]).toContain(statuses.find((status) => status !== 204));
      const winner = statuses[0] === 204 ? first : second;
      const rest = randomBytes(half);
      expect((await patchAt(b, path, half, rest)).status).toBe(204);
      await expectStored(fileId, Buffer.concat([winner, rest]));
    });

    it('reads an upload with its session and file in one statement, as the separate lookups read them', async () => {
      const { db } = a.services;
      const separately = async (id: string) => {
        const [upload] = await db.query<TusUploadRow>(
          `SELECT id, project_id, file_id, session_id, created_by, upload_length, upload_offset, parts,
             next_part, tail, metadata
           FROM tus_uploads WHERE project_id = $1 AND id = $2`,
          [project.id, id],
        );
        if (!upload) return undefined;
        if (upload.session_id === null)
          return { upload, session: undefined, file: await findFile(db, project.id, upload.file_id) };
        const found = await findSessionAndFile(db, project.id, upload.session_id);
        return { upload, session: found?.session, file: found?.file };
      };
      const expectSame = async (path: string) => {
        const id = path.split('/').pop()!;
        const joined = await findUploadWithSession(db, project.id, id);
        expect(joined).toBeDefined();
        expect(joined).toEqual(await separately(id));
        return joined!;
      };
      const open = await created(12 * MiB);
      expect((await patchAt(a, open.path, 0, randomBytes(6 * MiB))).status).toBe(204);
      const read = await expectSame(open.path);
      expect(read.session?.status).toBe('open');
      expect(read.upload.parts).toHaveLength(1);
      expect(read.file?.id).toBe(open.fileId);
      expect((await patchAt(a, open.path, 6 * MiB, randomBytes(6 * MiB))).status).toBe(204);
      expect((await expectSame(open.path)).session?.status).toBe('completed');
      const ended = await created(10);
      expect(
        (await request(`${a.url}${ended.path}`, 'DELETE', { headers: tusHeaders(project.key) })).status,
      ).toBe(204);
      expect((await expectSame(ended.path)).session?.status).toBe('aborted');
      const atOnce = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, {
          ...offsetStream,
          'upload-length': '3',
          'upload-metadata': `filename ${b64('once.bin')}`,
        }),
        body: Buffer.from('abc'),
      });
      const once = await expectSame(new URL(atOnce.headers.get('location')!).pathname);
      expect(once.session).toBeUndefined();
      expect(once.file?.status).not.toBe('uploading');
      expect(await findUploadWithSession(db, project.id, 'session_unknown')).toBeUndefined();
      const other = await a.newProject();
      expect(await findUploadWithSession(db, other.id, open.path.split('/').pop()!)).toBeUndefined();
    });

    it('reads the upload, its session and its file in one statement before a PATCH takes its lock', async () => {
      const { path } = await created(12 * MiB);
      const id = path.split('/').pop()!;
      const { db } = a.services;
      const query = db.query.bind(db);
      /** The statements of `patching` about the upload (other work of the node aside) before it was locked. */
      async function beforeLock(patching: Promise<{ status: number }>) {
        const statements: string[] = [];
        db.query = ((sql: string, params?: unknown[]) => {
          if (params?.includes(id)) statements.push(sql);
          return query(sql, params);
        }) as typeof db.query;
        try {
          expect((await patching).status).toBe(204);
        } finally {
          db.query = query;
        }
        const locked = statements.findIndex((sql) => sql.startsWith('UPDATE tus_uploads u SET lock_id'));
        expect(locked).toBeGreaterThan(-1);
        return statements.slice(0, locked);
      }
      // The first part, written once locked, and the last, staged while the lock is taken.
      expect(await beforeLock(patchAt(a, path, 0, randomBytes(6 * MiB)))).toEqual([
        expect.stringMatching(/FROM tus_uploads u\s+LEFT JOIN multipart_sessions s/),
      ]);
      expect(await beforeLock(patchAt(a, path, 6 * MiB, randomBytes(6 * MiB)))).toHaveLength(1);
    });

    it('grants a part in one statement only to an open session, within twice its total, never shrinking', async () => {
      const { path } = await created(10 * MiB);
      const sessionId = path.split('/').pop()!;
      const grant = (partNumber: number, size: number) =>
        grantOpenPart(a.services.db, sessionId, partNumber, size, 2);
      const grants = async () =>
        (
          await a.services.db.query<{ part_grants: Record<string, number> }>(
            'SELECT part_grants FROM multipart_sessions WHERE id = $1',
            [sessionId],
          )
        )[0]!.part_grants;
      expect(await grant(2, 8 * MiB)).toBe(true);
      expect(await grant(2, 6 * MiB)).toBe(true);
      expect(await grants()).toEqual({ '2': 8 * MiB });
      expect(await grant(3, 10 * MiB + 1)).toBe(false); // more than the total
      expect(await grant(3, 10 * MiB)).toBe(true);
      expect(await grant(4, 2 * MiB + 1)).toBe(false); // past twice the total with the others
      expect(await grants()).toEqual({ '2': 8 * MiB, '3': 10 * MiB });
      expect((await request(`${a.url}${path}`, 'DELETE', { headers: tusHeaders(project.key) })).status).toBe(
        204,
      );
      expect(await grant(4, MiB)).toBe(false);
    });

    it('drops the bytes of a PATCH refused once they were being written', async () => {
      const part = 6 * MiB;
      const { path, fileId } = await created(3 * part);
      const head = randomBytes(part);
      expect((await patchAt(a, path, 0, head)).status).toBe(204);
      // Both are second parts, written while their lock is awaited: one wins, the other is refused.
      const first = randomBytes(part);
      const second = randomBytes(part);
      const replies = await Promise.all([patchAt(a, path, part, first), patchAt(b, path, part, second)]);
      const statuses = replies.map((reply) => reply.status);
      expect(statuses.filter((status) => status === 204)).toHaveLength(1);
      expect([409, 423]).toContain(statuses.find((status) => status !== 204));
      if (storage === 'local') {
        // Only the local store writes a part before its number is known (S3 takes both at once).
        const temps = join(shared.COFFER_DATA_DIR, 'objects', '.tmp');
        await expect.poll(() => readdir(temps), { timeout: 5000 }).toEqual([]);
      }
      const winner = statuses[0] === 204 ? first : second;
      const rest = randomBytes(part);
      expect((await patchAt(b, path, 2 * part, rest)).status).toBe(204);
      await expectStored(fileId, Buffer.concat([head, winner, rest]));
    });

    /** A PATCH on `a` that sends the first `sent` bytes of `data` and then nothing, its connection left open; and its answer. */
    function stalledPatch(path: string, data: Buffer, sent: number) {
      const stalled = openPatch(path, data.length);
      const answered = new Promise<number | string>((resolve) => {
        stalled.on('response', (response) => resolve(response.statusCode!));
        stalled.on('error', (error) => resolve(error.message));
      });
      stalled.write(data.subarray(0, sent));
      return { stalled, answered };
    }

    it('has a stalled PATCH store what it received and let go when a PATCH of the upload comes from another node', async () => {
      const size = 6 * MiB;
      const { path, fileId } = await created(size);
      const data = randomBytes(size);
      const { stalled, answered } = stalledPatch(path, data, MiB + 7);
      await new Promise((resolve) => setTimeout(resolve, 500));
      // Not stalled yet: nothing recorded, and HEAD does not wait.
      expect(await offsetOf(`${b.url}${path}`)).toBe(0);
      // Within the seconds a PATCH waits for a busy upload, the stalled one stores what it received
      // and lets go: the new PATCH, sent from the start, is at the wrong offset.
      const resumed = await patchAt(b, path, 0, data);
      expect(resumed.status, JSON.stringify(resumed.body)).toBe(409);
      expect(await offsetOf(`${b.url}${path}`)).toBe(MiB + 7);
      expect((await patchAt(b, path, MiB + 7, data.subarray(MiB + 7))).status).toBe(204);
      await expectStored(fileId, data);
      stalled.destroy();
      expect(await answered).not.toBe(204);
    });

    it('answers HEAD from another node with the bytes a stalled PATCH received, stored once it let go', async () => {
      const data = randomBytes(24 * MiB);
      const { path, fileId } = await created(data.length);
      // A whole part of 16 MiB and 3 MiB of the next one, then nothing.
      const { stalled, answered } = stalledPatch(path, data, 19 * MiB);
      await expect
        .poll(() => offsetOf(`${b.url}${path}`), { timeout: 20_000, interval: 200 })
        .toBeGreaterThanOrEqual(16 * MiB);
      // Once it is stalled, a HEAD asks it to let go and answers when it has stored the 3 MiB.
      await expect.poll(() => offsetOf(`${b.url}${path}`), { timeout: 15_000, interval: 500 }).toBe(19 * MiB);
      expect(await answered).not.toBe(204);
      stalled.destroy();
      await upload(data, { uploadUrl: `${b.url}${path}`, headers: auth(project.key) });
      await expectStored(fileId, data);
    });

    it('answers HEAD with the offset recorded before the last PATCH, and PATCH with 423, while the upload is being completed', async () => {
      const data = randomBytes(6 * MiB);
      const { path, fileId } = await created(data.length);
      const { store } = a.services;
      const { completeMultipart } = store;
      let reached!: () => void;
      let resume!: () => void;
      const assembling = new Promise<void>((resolve) => {
        reached = resolve;
      });
      const resumed = new Promise<void>((resolve) => {
        resume = resolve;
      });
      store.completeMultipart = async (...args) => {
        reached();
        await resumed;
        return completeMultipart.apply(store, args);
      };
      try {
        const last = patchAt(a, path, 0, data);
        await assembling;
        const head = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
        expect(head.status).toBe(200);
        // Not the whole length: the completion may still fail.
        expect(head.headers.get('upload-offset')).toBe('0');
        expect(head.headers.get('upload-length')).toBe(String(data.length));
        const again = await patchAt(b, path, 0, Buffer.from('x'));
        expect(again.status).toBe(423);
        resume();
        expect((await last).status).toBe(204);
      } finally {
        resume();
        store.completeMultipart = completeMultipart;
      }
      await expectStored(fileId, data);
    });

    it('answers a finished deferred upload with its full length though its last PATCH could not record it', async () => {
      const data = randomBytes(6 * MiB + 9);
      const creation = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, {
          'upload-defer-length': '1',
          'upload-metadata': `filename ${b64('late.bin')}`,
        }),
      });
      const path = new URL(creation.headers.get('location')!).pathname;
      expect((await patchAt(a, path, 0, data.subarray(0, 6 * MiB))).status).toBe(204);
      // The lock is taken from the last PATCH while its parts are assembled: its progress is not recorded.
      const { store, db } = a.services;
      const { completeMultipart } = store;
      store.completeMultipart = async (...args) => {
        await db.query(`UPDATE tus_uploads SET lock_id = 'elsewhere' WHERE id = $1`, [path.split('/').pop()]);
        return completeMultipart.apply(store, args);
      };
      try {
        const last = await request(`${a.url}${path}`, 'PATCH', {
          headers: tusHeaders(project.key, {
            ...offsetStream,
            'upload-offset': String(6 * MiB),
            'upload-length': String(data.length),
          }),
          body: data.subarray(6 * MiB),
        });
        expect(last.status).toBe(204);
      } finally {
        store.completeMultipart = completeMultipart;
      }
      const head = await request(`${b.url}${path}`, 'HEAD', { headers: tusHeaders(project.key) });
      expect(head.status).toBe(200);
      expect(head.headers.get('upload-offset')).toBe(String(data.length));
      expect(head.headers.get('upload-length')).toBe(String(data.length));
      expect(head.headers.get('upload-defer-length')).toBeNull();
      await expectStored(creation.headers.get('x-coffer-file-id')!, data);
    });
  });
});
