import type { Logger } from 'pino';
import type { Db, Queryable } from '../../infra/db.ts';
import { ImageError } from '../../infra/images/errors.ts';
import {
  completeJob,
  createJobRunner,
  enqueueJob,
  JOBS,
  type Job,
  type JobHandler,
} from '../../infra/jobs/index.ts';
import { exponentialBackoff } from '../../infra/jobs/retry.ts';
import * as files from '../files/repo.ts';
import type { Project } from '../projects/schemas.ts';
import type { ProjectService } from '../projects/service.ts';
import { normalize, resolveFormat } from './params.ts';
import type { RenditionService } from './service.ts';

/** Types worth a try: raster images (SVG is refused by the renderer anyway, and never queued). */
const isRaster = (contentType: string) => contentType.startsWith('image/') && !contentType.includes('svg');

/**
 * Queues the eager thumbnails of a file that just became ready, in the transaction that made it so,
 * when its project asks for any and the file is an image.
 */
export async function queueThumbnails(
  q: Queryable,
  project: Project,
  file: Pick<files.FileRow, 'id' | 'content_type'>,
): Promise<void> {
  if (project.settings.thumbnails?.length && isRaster(file.content_type)) {
    await enqueueJob(q, 'thumbnail', project.id, file.id);
  }
}

/**
 * Makes a ready image's thumbnails: each of the project's `thumbnails` specs as a stored rendition,
 * so that the first request finds it made. `auto` makes every format a browser may be answered
 * (AVIF, WebP and the fallback). A rendition that cannot be made is logged and skipped: a
 * thumbnail never fails its file.
 */
export function createThumbnailer(deps: {
  db: Db;
  projects: ProjectService;
  renditions: RenditionService;
  logger: Logger;
  options: { concurrency: number; leaseSeconds: number };
}) {
  const { db, projects, renditions, logger } = deps;

  const thumbnail: JobHandler<Job> = {
    async run(job) {
      const project = await projects.getProject(job.project_id);
      const file = job.file_id ? await files.findFile(db, job.project_id, job.file_id) : undefined;
      if (project && file && file.status === 'ready' && file.deleted_at === null) {
        for (const spec of project.settings.thumbnails ?? []) {
          const params = normalize(spec);
          const accepts = params.format === 'auto' ? ['image/avif', 'image/webp', undefined] : [undefined];
          const made = new Set<string>();
          for (const accept of accepts) {
            const resolved = resolveFormat(params, accept, file.content_type);
            if (made.has(resolved.format)) continue;
            made.add(resolved.format);
            try {
              await renditions.serve(file, resolved, params.format === 'auto', { stored: true });
            } catch (error) {
              // Not an image after all, or too large: the file stays as it is. A full queue: later.
              if (!(error instanceof ImageError) || error.code === 'Busy') throw error;
              logger.info({ file_id: file.id, reason: error.code }, 'thumbnail not made');
            }
          }
        }
      }
      await completeJob(db, job);
    },
    // A store or database briefly away: tried again for an hour, then left to the first request.
    retry: { backoffSeconds: exponentialBackoff(5, 300), windowSeconds: 3600 },
    giveUp: (job) => completeJob(db, job),
    exhausted: (job) => completeJob(db, job),
    describe: (job) => ({ file_id: job.file_id }),
  };

  return createJobRunner({
    db,
    queue: JOBS,
    handlers: { thumbnail },
    concurrency: deps.options.concurrency,
    leaseSeconds: deps.options.leaseSeconds,
    logger,
  });
}

export type Thumbnailer = ReturnType<typeof createThumbnailer>;
