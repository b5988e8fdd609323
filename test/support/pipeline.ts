import type { Db } from '../../src/infra/db.ts';
import type { Scanner } from '../../src/infra/scanner/index.ts';
import { createPipeline, type Pipeline, type PipelineOptions } from '../../src/modules/pipeline/service.ts';
import type { TestCoffer } from './coffer.ts';
import { sleep } from './processes.ts';

/** A 1×1 PNG: bytes that are what they claim to be. */
export const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

export const quiet = { info() {}, warn() {}, error() {} } as never;

/** A pipeline of its own over `coffer`'s store and projects, scanning with `scanner`. */
export function pipelineWith(
  coffer: TestCoffer,
  scanner: Scanner,
  options: Partial<PipelineOptions> = {},
  db = coffer.services.db,
) {
  const { store, projects } = coffer.services;
  return createPipeline({ db, store, scanner, projects, logger: quiet, options });
}

/** Runs the pipeline until no job is due. */
export async function drain(pipeline: Pipeline): Promise<void> {
  while ((await pipeline.runOnce()) > 0);
}

/**
 * Runs `pipeline` until the file leaves `processing` (or fails the test after `timeoutMs`); returns
 * its status, read from the database (the API answers 409 for a quarantined file).
 */
export async function processUntilSettled(
  db: Db,
  id: string,
  pipeline: Pipeline,
  timeoutMs = 20_000,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await pipeline.runOnce();
    const [file] = await db.query<{ status: string }>('SELECT status FROM files WHERE id = $1', [id]);
    if (file!.status !== 'processing') return file!.status;
    if (Date.now() > deadline) throw new Error(`${id} still processing after ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** The types of the events recorded for a file, oldest first. */
export const eventTypes = async (db: Db, fileId: string) =>
  (await db.query<{ type: string }>('SELECT type FROM events WHERE file_id = $1 ORDER BY id', [fileId])).map(
    (e) => e.type,
  );
