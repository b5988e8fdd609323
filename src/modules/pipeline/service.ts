import { createHash } from 'node:crypto';
import { addAbortSignal, type Readable, Transform } from 'node:stream';
import type { Logger } from 'pino';
import type { Db, Queryable } from '../../infra/db.ts';
import {
  completeJob,
  createJobRunner,
  enqueueJob,
  exponentialBackoff,
  JOBS,
  type Job,
  type JobHandler,
  type RetryPolicy,
} from '../../infra/jobs/index.ts';
import type { Metrics } from '../../infra/metrics.ts';
import { type Scanner, ScanRejectedError } from '../../infra/scanner/index.ts';
import { isStoreError, type ObjectStore } from '../../infra/storage/object-store.ts';
import { failpoint } from '../../lib/failpoints.ts';
import { recordEvent } from '../events/repo.ts';
import * as files from '../files/repo.ts';
import { SCAN_UNAVAILABLE } from '../files/rules.ts';
import { commitScannedContent } from '../ingest/content-commit.ts';
import { findContent, setContentChecksum, transitionContent } from '../ingest/content-repo.ts';
import type { ProjectService } from '../projects/service.ts';
import { queueThumbnails } from '../renditions/thumbnails.ts';
import { setVersionChecksum } from '../versions/repo.ts';
import { checkMime, SNIFF_BYTES } from './mime-check.ts';

export interface PipelineOptions {
  /** Jobs one worker runs at once. */
  concurrency: number;
  /** Lease of a claimed job, renewed while it runs: a dead worker's job returns after it. */
  leaseSeconds: number;
  /**
   * How long a job may keep failing (scanner or store unavailable) from its first failure before it
   * is given up: the file is then failed (`scan_unavailable`), never marked clean.
   */
  retryWindowSeconds: number;
  /** Delay before attempt n+1 after attempt n failed. */
  backoffSeconds(attempt: number): number;
}

export const DEFAULT_PIPELINE_OPTIONS: PipelineOptions = {
  concurrency: 4,
  leaseSeconds: 30,
  retryWindowSeconds: 86_400,
  backoffSeconds: exponentialBackoff(5, 600),
};

type Verdict =
  | { status: 'ready' }
  | { status: 'quarantined'; signature: string }
  | { status: 'failed'; reason: string };

const EVENT_OF = { ready: 'file.ready', failed: 'file.failed', quarantined: 'file.quarantined' } as const;

/**
 * Settles new content still `processing` whose file is gone: it can never become current, so it
 * is failed like rejected content, and the collector removes its object after the grace period.
 */
async function discardContent(q: Queryable, contentId: string): Promise<void> {
  await transitionContent(q, contentId, 'processing', 'failed', { failure_reason: 'file_deleted' });
}

/** The bytes a job judges, and how its verdict is written (in the transaction that finishes the job). */
interface Subject {
  filename: string;
  storage_key: string;
  content_type: string;
  size_bytes: number;
  checksum_sha256: string | null;
  apply(q: Queryable, verdict: Verdict): Promise<void>;
}

/**
 * Passes `source` through while hashing it, for a reader that reads it anyway (the scanner): the
 * digest is known only when every byte went through.
 */
function hashing(source: Readable): { stream: Readable; sha256(): string | undefined } {
  const hash = createHash('sha256');
  let digest: string | undefined;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      digest = hash.digest('hex');
      done();
    },
  });
  source.on('error', (error) => stream.destroy(error));
  stream.on('close', () => source.destroy());
  return { stream: source.pipe(stream), sha256: () => digest };
}

async function sha256Of(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Records a checksum computed here on every row that holds the object without one. */
async function recordChecksum(q: Queryable, storageKey: string, sha256: string): Promise<void> {
  await files.setChecksum(q, storageKey, sha256);
  await setVersionChecksum(q, storageKey, sha256);
  await setContentChecksum(q, storageKey, sha256);
}

async function readHead(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    length += (chunk as Buffer).length;
    if (length >= limit) break;
  }
  stream.destroy();
  return Buffer.concat(chunks).subarray(0, limit);
}

/**
 * The processing pipeline of `processing` files: a virus scan of the whole object, then a check
 * that the leading bytes agree with the declared content type. Each verdict and its event are
 * written in one transaction with the end of its job, only while the file is still `processing`
 * and the job still leased to this worker. Its jobs (scan, digest) run on the jobs module.
 */
export function createPipeline(deps: {
  db: Db;
  store: ObjectStore;
  scanner: Scanner;
  projects: ProjectService;
  logger: Logger;
  metrics?: Metrics;
  options?: Partial<PipelineOptions>;
}) {
  const { db, store, scanner, projects, logger, metrics } = deps;
  const options = { ...DEFAULT_PIPELINE_OPTIONS, ...deps.options };

  /**
   * The verdict on the subject's bytes, and their SHA-256 when the scan read them all. The reads
   * stop when `signal` aborts (the job's lease was lost), and the scan then fails.
   */
  async function judge(
    subject: Subject,
    signal: AbortSignal,
  ): Promise<{ verdict: Verdict; sha256: string | undefined }> {
    signal.throwIfAborted();
    const read = hashing(await store.read(subject.storage_key));
    const scan = await scanner.scan(addAbortSignal(signal, read.stream));
    const sha256 = read.sha256();
    if (!scan.clean) return { verdict: { status: 'quarantined', signature: scan.signature }, sha256 };
    const size = subject.size_bytes;
    const head =
      size === 0
        ? Buffer.alloc(0)
        : await readHead(
            addAbortSignal(
              signal,
              await store.read(subject.storage_key, { start: 0, end: Math.min(size, SNIFF_BYTES) - 1 }),
            ),
            SNIFF_BYTES,
          );
    const mismatch = await checkMime(subject.content_type, head, subject.filename);
    const verdict: Verdict = mismatch
      ? { status: 'failed', reason: `mime_mismatch: ${mismatch}` }
      : { status: 'ready' };
    return { verdict, sha256 };
  }

  const reasonOf = (verdict: Verdict) =>
    verdict.status === 'failed' ? verdict.reason : verdict.status === 'quarantined' ? 'virus_detected' : null;
  const signatureOf = (verdict: Verdict) => (verdict.status === 'quarantined' ? verdict.signature : null);

  /** What a job is about, still awaiting its verdict; undefined when there is nothing left to decide. */
  async function subjectOf(job: Job): Promise<Subject | undefined> {
    if (!job.file_id) return undefined;
    const file = await files.findFile(db, job.project_id, job.file_id);
    const project = await projects.getProject(job.project_id);
    // Deleted while waiting, or moved on already: nothing to decide any more.
    if (!file || !project || file.deleted_at !== null) return undefined;
    if (job.content_id) {
      const content = await findContent(db, file.id, job.content_id);
      if (content?.status !== 'processing') return undefined;
      // New bytes of a ready file: they replace its content only when clean; the file is untouched otherwise.
      return {
        ...content,
        filename: file.filename,
        apply: async (q, verdict) => {
          // Locked, so that a delete either happened before (and the content is discarded) or waits.
          const current = await files.findFile(q, file.project_id, file.id, true);
          if (!current || current.deleted_at !== null) {
            await discardContent(q, content.id);
            return;
          }
          if (verdict.status === 'ready') {
            // The content's row is read again as it settles: with the checksum this job recorded just before.
            await commitScannedContent(q, project, current, content);
            return;
          }
          await transitionContent(q, content.id, 'processing', verdict.status, {
            failure_reason: reasonOf(verdict),
            scan_signature: signatureOf(verdict),
          });
        },
      };
    }
    if (file.status !== 'processing') return undefined;
    return {
      ...file,
      apply: async (q, verdict) => {
        const updated = await files.transitionFile(
          q,
          file.project_id,
          file.id,
          'processing',
          verdict.status,
          {
            failure_reason: reasonOf(verdict),
            scan_signature: signatureOf(verdict),
          },
        );
        if (!updated) return;
        await recordEvent(q, project, EVENT_OF[verdict.status], updated);
        if (verdict.status === 'ready') await queueThumbnails(q, project, updated);
      },
    };
  }

  /** Ends a job with nothing left to decide; content left processing belongs to a file deleted while it waited. */
  async function dismiss(job: Job): Promise<void> {
    await db.tx(async (q) => {
      await completeJob(q, job);
      if (job.content_id) await discardContent(q, job.content_id);
    });
  }

  /** Writes the verdict, its event and the checksum read on the way, and ends the job: all or nothing. */
  async function settle(
    job: Job,
    subject: Subject,
    verdict: Verdict,
    sha256: string | undefined,
  ): Promise<void> {
    await db.tx(async (q) => {
      await completeJob(q, job);
      if (subject.checksum_sha256 === null) {
        if (sha256) await recordChecksum(q, subject.storage_key, sha256);
        // The scanner stopped before the end: the bytes are read once more, for their checksum alone.
        else if (verdict.status === 'ready')
          await enqueueJob(q, 'digest', job.project_id, job.file_id, job.content_id, subject.storage_key);
      }
      await subject.apply(q, verdict);
    });
    metrics?.scanVerdicts.inc({ verdict: verdict.status });
    logger.info(
      { file_id: job.file_id, content_id: job.content_id, status: verdict.status },
      'file processed',
    );
  }

  const retry: RetryPolicy = {
    backoffSeconds: options.backoffSeconds,
    windowSeconds: options.retryWindowSeconds,
  };
  const describe = (job: Job) => ({
    project_id: job.project_id,
    file_id: job.file_id,
    content_id: job.content_id,
  });

  /**
   * A scan fails for now when the scanner (or the store) is unavailable: it is retried with backoff
   * and, after failing for the whole retry window, given up with the file failed, closed.
   */
  const scan: JobHandler<Job> = {
    retry,
    describe,
    async run(job, { signal }) {
      const subject = await subjectOf(job);
      if (!subject) return dismiss(job);
      let judged: { verdict: Verdict; sha256: string | undefined };
      const started = performance.now();
      try {
        judged = await judge(subject, signal);
      } catch (error) {
        if (!(error instanceof ScanRejectedError)) throw error;
        judged = {
          verdict: { status: 'failed', reason: `scan_incomplete: ${error.message}` },
          sha256: undefined,
        };
      } finally {
        metrics?.scanDuration.observe((performance.now() - started) / 1000);
      }
      failpoint('scan.judged');
      await settle(job, subject, judged.verdict, judged.sha256);
    },
    async giveUp(job, error) {
      const subject = await subjectOf(job);
      if (!subject) return dismiss(job);
      // Fail closed: bytes that could not be scanned are never marked clean.
      await settle(
        job,
        subject,
        { status: 'failed', reason: `${SCAN_UNAVAILABLE}: ${error.message}` },
        undefined,
      );
    },
  };

  /**
   * The SHA-256 of bytes the store did not hash on the way in (S3): the object queued with the job
   * (whatever the file holds by now) is read once and its checksum recorded wherever it is referred
   * to. Retried while the store fails; given up (checksum stays null) after the retry window. An object
   * gone (collected: replaced or deleted meanwhile) has nothing left to hash.
   */
  const digest: JobHandler<Job> = {
    retry,
    describe,
    async run(job, { signal }) {
      const key = job.storage_key;
      const file = job.file_id ? await files.findFile(db, job.project_id, job.file_id) : undefined;
      if (!key || !file || file.deleted_at !== null) return completeJob(db, job);
      let sha256: string;
      try {
        sha256 = await sha256Of(addAbortSignal(signal, await store.read(key)));
      } catch (error) {
        if (isStoreError(error, 'NoSuchKey')) return completeJob(db, job);
        throw error;
      }
      await db.tx(async (q) => {
        await completeJob(q, job);
        await recordChecksum(q, key, sha256);
      });
    },
    giveUp: (job) => completeJob(db, job),
  };

  const runner = createJobRunner({
    db,
    queue: JOBS,
    handlers: { scan, digest },
    concurrency: options.concurrency,
    leaseSeconds: options.leaseSeconds,
    logger,
  });

  return {
    /** The worker loop's side: claims due jobs into free slots and runs them (see createJobRunner). */
    runner,
    /** One pass: claims the due jobs that fit and waits until they are processed; returns how many. */
    async runOnce(): Promise<number> {
      const started = await runner.runOnce();
      await runner.settle();
      return started;
    },
  };
}

export type Pipeline = ReturnType<typeof createPipeline>;
