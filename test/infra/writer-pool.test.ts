import { closeSync, openSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { WriterReply, WriterRequest } from '../../src/infra/storage/write-worker.ts';
import { WriterPool } from '../../src/infra/storage/writer-pool.ts';

const MiB = 1024 * 1024;
let dir: string;
const descriptors: number[] = [];
let worker: Worker | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'coffer-writer-pool-'));
});

afterEach(async () => {
  await worker?.terminate();
  worker = undefined;
  for (const fd of descriptors.splice(0)) closeSync(fd);
  await rm(dir, { recursive: true, force: true });
});

/** A new file of the test's folder, open for writing. */
function newFile(name: string): { path: string; fd: number } {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  descriptors.push(fd);
  return { path, fd };
}

it('starts another writer thread only for uploads at once, not for uploads one after another', async () => {
  const pool = new WriterPool(2);
  const upload = async (name: string) => {
    const sink = pool.open(newFile(name).fd, 'sha256');
    await sink.write(Buffer.alloc(256 * 1024, 1));
    return sink;
  };
  for (const name of ['first', 'second', 'third']) await (await upload(name)).finish();
  expect(pool.started).toBe(1);
  const together = await Promise.all([upload('fourth'), upload('fifth')]);
  expect(pool.started).toBe(2);
  await Promise.all(together.map((sink) => sink.finish()));
  expect(statSync(join(dir, 'fifth')).size).toBe(256 * 1024);
});

it("frees each chunk's memory once written, not at the writer thread's next garbage collection", async () => {
  const thread = new Worker(new URL('../../src/infra/storage/write-worker.ts', import.meta.url));
  worker = thread;
  const { path, fd } = newFile('upload');
  let nextId = 1;
  /** Writes `count` chunks of 1 MiB at the start of the file through the worker; answers its last reply. */
  const upload = (count: number) => {
    const id = nextId++;
    const settled = new Promise<WriterReply>((resolve) => {
      const listener = (reply: WriterReply) => {
        if (reply.type === 'returned' || reply.id !== id || reply.type === 'ack') return;
        thread.off('message', listener);
        resolve(reply);
      };
      thread.on('message', listener);
    });
    thread.postMessage({ type: 'open', id, fd, algorithm: 'sha256' } satisfies WriterRequest);
    for (let i = 0; i < count; i++) {
      const chunk = Buffer.allocUnsafeSlow(MiB).fill(i);
      thread.postMessage({ type: 'chunks', id, data: [chunk] } satisfies WriterRequest, [chunk.buffer]);
    }
    thread.postMessage({ type: 'end', id } satisfies WriterRequest);
    return settled;
  };
  const outside = async () => (await thread.getHeapStatistics()).external_memory;
  expect((await upload(1)).type).toBe('done'); // the worker's own start
  const before = await outside();
  // Less than the memory outside its heap past which V8 collects garbage by itself.
  expect((await upload(32)).type).toBe('done');
  expect(statSync(path).size).toBe(32 * MiB);
  expect((await outside()) - before).toBeLessThan(4 * MiB);
});
