import { fdatasync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { giveBack, isWanted } from './wanted-back.ts';
import type { WriterReply, WriterRequest } from './write-worker.ts';

/** Bytes of one upload that may be on their way to the worker before reading pauses. */
const MAX_IN_FLIGHT = 4 * 1024 * 1024;
/**
 * Bytes of one upload gathered into a message to the worker, answered by one acknowledgement: a socket
 * hands a body over 64 KiB at a time, and a message each cost both threads more than moving the bytes.
 * Less is sent at the end of the event loop's turn that read it.
 */
const BATCH_BYTES = 1024 * 1024;
/**
 * Bytes an upload writes between two syncs started in the background, from this thread (idle while
 * the worker hashes): the sync that ends the upload, which its answer waits for, then finds little to flush.
 */
const SYNC_STEP = 2 * 1024 * 1024;

interface Job {
  inFlight: number;
  /** Bytes the worker has written. */
  written?: (bytes: number) => void;
  drained?: () => void;
  /** A digest's files on their way, answered in order. */
  files?: { resolve(file: HashedFile): void; reject(error: Error): void }[];
  done?: { resolve(digest: string): void; reject(error: Error): void };
  aborted?: () => void;
  failure?: Error;
}

export interface FileSink {
  /** Hands a chunk over (its memory is moved to the worker: do not use it afterwards). */
  write(chunk: Buffer): Promise<void>;
  /** Waits for every chunk to be written and synced to disk; returns the hex digest (empty unhashed). */
  finish(): Promise<string>;
  /** Stops the upload; once this resolves the worker no longer touches the descriptor, which the caller closes. */
  abort(): Promise<void>;
}

/** A file fed to a digest: its size, and what tells it from a file later put at the same path. */
export interface HashedFile {
  size: number;
  identity: string;
}

export interface FileDigest {
  /** Feeds the whole file at `path` (files are hashed in the order they are added). */
  add(path: string): Promise<HashedFile>;
  /** The hex digest of every file added. */
  finish(): Promise<string>;
  /** Drops the digest. */
  abort(): Promise<void>;
}

/**
 * Writes and hashes uploads on a worker thread, so that the main thread only reads sockets:
 * hashing a large upload (and the garbage its chunks leave) no longer competes with serving
 * requests. Chunk memory is transferred, not copied, when it is not shared with other data.
 */
export class WriterThread {
  #worker: Worker | undefined;
  #jobs = new Map<number, Job>();
  #nextId = 1;
  /** The memory of chunks to be given back once written, by loan. */
  #loans = new Map<number, ArrayBuffer[]>();
  #nextLoan = 1;

  /** Uploads and digests under way. */
  get busy(): number {
    return this.#jobs.size;
  }

  /** Whether its thread runs: it starts with its first job. */
  get started(): boolean {
    return this.#worker !== undefined;
  }

  #post(message: WriterRequest, transfer: ArrayBuffer[] = []): void {
    if (!this.#worker) {
      this.#worker = new Worker(new URL('./write-worker.ts', import.meta.url));
      this.#worker.unref();
      this.#worker.on('message', (reply: WriterReply) => this.#receive(reply));
      this.#worker.on('error', (error) => this.#failAll(error));
      this.#worker.on('exit', () => {
        this.#worker = undefined;
        this.#failAll(new Error('the writer thread stopped'));
      });
    }
    this.#worker.postMessage(message, transfer);
  }

  #receive(reply: WriterReply): void {
    if (reply.type === 'returned') {
      const originals = this.#loans.get(reply.loan) ?? [];
      this.#loans.delete(reply.loan);
      for (const [index, memory] of reply.data.entries()) giveBack(originals[index]!, memory);
      return;
    }
    const job = this.#jobs.get(reply.id);
    if (!job) return;
    if (reply.type === 'hashed') {
      job.files?.shift()?.resolve({ size: reply.size, identity: reply.identity });
    } else if (reply.type === 'ack') {
      job.inFlight -= reply.bytes;
      job.written?.(reply.bytes);
      if (job.inFlight <= MAX_IN_FLIGHT) job.drained?.();
    } else if (reply.type === 'done') {
      this.#jobs.delete(reply.id);
      job.done?.resolve(reply.digest);
    } else if (reply.type === 'aborted') {
      this.#jobs.delete(reply.id);
      job.aborted?.();
    } else {
      if (job.aborted) return; // an abort is on its way: it settles the job
      this.#fail(reply.id, Object.assign(new Error(reply.message), { code: reply.code }));
    }
  }

  #fail(id: number, error: Error): void {
    const job = this.#jobs.get(id);
    if (!job) return;
    job.failure = error;
    job.drained?.();
    for (const file of job.files?.splice(0) ?? []) file.reject(error);
    job.done?.reject(error);
    if (job.aborted) {
      this.#jobs.delete(id);
      job.aborted();
    }
  }

  #failAll(error: Error): void {
    for (const id of [...this.#jobs.keys()]) this.#fail(id, error);
  }

  #start(job: Job, message: WriterRequest): number {
    this.#jobs.set(message.id, job);
    this.#post(message);
    return message.id;
  }

  /** Asks for the job's digest once every earlier message is handled. */
  #finish(id: number, job: Job): Promise<string> {
    if (job.failure) {
      this.#jobs.delete(id); // the worker dropped it when it failed
      return Promise.reject(job.failure);
    }
    const done = new Promise<string>((resolve, reject) => {
      job.done = { resolve, reject };
    });
    this.#post({ type: 'end', id });
    return done;
  }

  #abort(id: number, job: Job): Promise<void> {
    if (!this.#jobs.has(id) || !this.#worker) return Promise.resolve();
    const aborted = new Promise<void>((resolve) => {
      job.aborted = resolve;
    });
    this.#post({ type: 'abort', id });
    return aborted;
  }

  open(fd: number, algorithm: 'sha256' | 'md5' | null): FileSink {
    const job: Job = { inFlight: 0 };
    const id = this.#start(job, { type: 'open', id: this.#nextId++, fd, algorithm });
    let unsynced = 0;
    let syncing: Promise<void> | undefined;
    // A failed sync fails the upload: its error is reported once, maybe not to the worker's own sync.
    let syncFailure: Error | undefined;
    job.written = (bytes) => {
      unsynced += bytes;
      if (unsynced < SYNC_STEP || syncing || syncFailure) return;
      unsynced = 0;
      syncing = new Promise<void>((resolve) =>
        fdatasync(fd, (error) => {
          syncFailure ??= error ?? undefined;
          syncing = undefined;
          resolve();
        }),
      );
    };
    /** The descriptor is the caller's again once no background sync uses it. */
    const settled = async () => {
      await syncing;
      if (syncFailure) throw syncFailure;
    };
    let batch: Buffer[] = [];
    let batched = 0;
    let sendScheduled = false;
    let ended = false;
    const send = () => {
      if (batch.length === 0 || ended) return;
      const data = batch;
      job.inFlight += batched;
      batch = [];
      batched = 0;
      const buffers = data.map((chunk) => chunk.buffer as ArrayBuffer);
      const indices = buffers.flatMap((buffer, index) => (isWanted(buffer) ? [index] : []));
      const loan = indices.length > 0 ? { id: this.#nextLoan++, indices } : undefined;
      try {
        this.#post({ type: 'chunks', id, data, loan }, buffers);
        if (loan)
          this.#loans.set(
            loan.id,
            indices.map((index) => buffers[index]!),
          );
      } catch (error) {
        // Memory a native addon allocated (sharp's output) cannot be moved: it is copied instead.
        if (!(error instanceof DOMException && error.name === 'DataCloneError')) throw error;
        const owned = Buffer.allocUnsafeSlow(data.reduce((sum, chunk) => sum + chunk.length, 0));
        let offset = 0;
        for (const chunk of data) offset += chunk.copy(owned, offset);
        this.#post({ type: 'chunks', id, data: [owned] }, [owned.buffer as ArrayBuffer]);
      }
    };
    return {
      write: async (chunk) => {
        if (job.failure) throw job.failure;
        // Moved when the chunk owns its memory; copied into unpooled memory when it shares it.
        let owned = chunk;
        if (
          chunk.byteOffset !== 0 ||
          chunk.byteLength !== chunk.buffer.byteLength ||
          !(chunk.buffer instanceof ArrayBuffer)
        ) {
          owned = Buffer.allocUnsafeSlow(chunk.length);
          chunk.copy(owned);
        }
        batch.push(owned);
        batched += owned.length;
        if (batched >= BATCH_BYTES) send();
        else if (!sendScheduled) {
          // A body that comes slowly reaches the disk without waiting for a MiB: what arrived in this
          // turn of the event loop goes once the turn's reads are done.
          sendScheduled = true;
          setImmediate(() => {
            sendScheduled = false;
            send();
          });
        }
        while (job.inFlight > MAX_IN_FLIGHT && !job.failure) {
          await new Promise<void>((resolve) => {
            job.drained = resolve;
          });
        }
        if (job.failure) throw job.failure;
      },
      finish: async () => {
        send();
        ended = true;
        const digest = await this.#finish(id, job).catch(async (error: unknown) => {
          await syncing;
          throw error;
        });
        await settled();
        return digest;
      },
      abort: async () => {
        ended = true;
        batch = [];
        await this.#abort(id, job);
        await syncing;
      },
    };
  }

  digest(algorithm: 'sha256' | 'md5'): FileDigest {
    const job: Job = { inFlight: 0, files: [] };
    const id = this.#start(job, { type: 'digest', id: this.#nextId++, algorithm });
    return {
      add: (path) => {
        if (job.failure) return Promise.reject(job.failure);
        const added = new Promise<HashedFile>((resolve, reject) => job.files!.push({ resolve, reject }));
        this.#post({ type: 'file', id, path });
        return added;
      },
      finish: () => this.#finish(id, job),
      abort: () => this.#abort(id, job),
    };
  }
}

/**
 * Writer threads for `size` uploads at once. An upload goes to a started thread with none under way,
 * else to one not started yet, else to the least busy: a thread starts only once that many uploads
 * run at once (each holds some 17 MiB once started), and parallel uploads (parts) hash in parallel.
 */
export class WriterPool {
  readonly #threads: WriterThread[];

  constructor(size: number) {
    this.#threads = Array.from({ length: size }, () => new WriterThread());
  }

  /** Threads started so far. */
  get started(): number {
    return this.#threads.filter((thread) => thread.started).length;
  }

  open(fd: number, algorithm: 'sha256' | 'md5' | null): FileSink {
    const rank = (thread: WriterThread) => thread.busy * 2 + (thread.started ? 0 : 1);
    const thread = this.#threads.reduce((best, other) => (rank(other) < rank(best) ? other : best));
    return thread.open(fd, algorithm);
  }
}

const uploads = new WriterPool(Math.min(4, availableParallelism()));
/** Digests of stored files run on a thread of their own, so that they never hold up an upload's writes. */
const digester = new WriterThread();

/** The writer threads of the process, shared by every store. */
export const writers = {
  open(fd: number, algorithm: 'sha256' | 'md5' | null): FileSink {
    return uploads.open(fd, algorithm);
  },
  digest(algorithm: 'sha256' | 'md5'): FileDigest {
    return digester.digest(algorithm);
  },
};
