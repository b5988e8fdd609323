import { createHash, type Hash } from 'node:crypto';
import { fdatasyncSync, writeSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';

/** Messages of writer-pool.ts: one upload is an `open`, its `chunk`s in order, then `end` or `abort`. */
export type WriterRequest =
  | { type: 'open'; id: number; fd: number; algorithm: 'sha256' | 'md5' }
  | { type: 'chunk'; id: number; data: Uint8Array }
  | { type: 'end'; id: number }
  | { type: 'abort'; id: number };

export type WriterReply =
  | { type: 'ack'; id: number; bytes: number }
  | { type: 'done'; id: number; digest: string }
  | { type: 'aborted'; id: number }
  | { type: 'error'; id: number; message: string };

const jobs = new Map<number, { fd: number; hash: Hash; position: number }>();
const port = parentPort!;

function handle(message: WriterRequest): void {
  if (message.type === 'open') {
    jobs.set(message.id, { fd: message.fd, hash: createHash(message.algorithm), position: 0 });
    return;
  }
  if (message.type === 'abort') {
    // Every earlier chunk of the upload has been handled: its descriptor may now be closed and reused.
    jobs.delete(message.id);
    port.postMessage({ type: 'aborted', id: message.id } satisfies WriterReply);
    return;
  }
  const job = jobs.get(message.id);
  if (!job) return; // failed already
  if (message.type === 'chunk') {
    const data = message.data;
    for (let offset = 0; offset < data.length; ) {
      const written = writeSync(job.fd, data, offset, data.length - offset, job.position);
      offset += written;
      job.position += written;
    }
    job.hash.update(data);
    port.postMessage({ type: 'ack', id: message.id, bytes: data.length } satisfies WriterReply);
  } else if (message.type === 'end') {
    fdatasyncSync(job.fd);
    jobs.delete(message.id);
    port.postMessage({ type: 'done', id: message.id, digest: job.hash.digest('hex') } satisfies WriterReply);
  }
}

port.on('message', (message: WriterRequest) => {
  try {
    handle(message);
  } catch (error) {
    jobs.delete(message.id);
    port.postMessage({
      type: 'error',
      id: message.id,
      message: (error as Error).message,
    } satisfies WriterReply);
  }
});
