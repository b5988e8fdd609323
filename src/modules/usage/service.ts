import type { Logger } from 'pino';
import { quotaExceeded } from '../../domain/errors.ts';
import type { Db, Queryable } from '../../infra/db.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { Project } from '../projects/schemas.ts';
import {
  addToUsage,
  COUNTERS,
  findDrift,
  findUsage,
  foldUsage,
  lockQuotaAdmission,
  lockReconcile,
  totals,
} from './repo.ts';
import type { Usage } from './schemas.ts';

/** What one reconcile pass corrected: projects, and the absolute differences of their counters. */
export interface Drift {
  projects: number;
  files: number;
  bytes: number;
}

/**
 * Refuses (403 QUOTA_EXCEEDED, rolling the transaction back) an upload that took its project past a
 * quota. Called in the transaction that wrote the upload's row, after it (that write counted the
 * upload); for a project with quotas, admissions take a per-project lock until commit, so concurrent
 * uploads are admitted one after the other and can never overshoot together. Projects without
 * quotas take no lock. `requested`: what the upload added.
 */
export async function enforceQuotas(
  q: Queryable,
  project: Project,
  requested: { bytes: number; files: number },
): Promise<void> {
  const maxBytes = project.settings.max_storage_bytes ?? null;
  const maxFiles = project.settings.max_files ?? null;
  if (maxBytes === null && maxFiles === null) return;
  // One admission at a time per project, until commit; the sums then see every upload admitted before.
  await lockQuotaAdmission(q, project.id);
  const held = totals(await findUsage(q, project.id));
  if (maxFiles !== null && requested.files > 0 && held.files > maxFiles) {
    throw quotaExceeded('max_files', maxFiles, held.files - requested.files, requested.files);
  }
  const bytes = held.usedBytes + held.reservedBytes;
  if (maxBytes !== null && requested.bytes > 0 && bytes > maxBytes) {
    throw quotaExceeded('max_storage_bytes', maxBytes, bytes - requested.bytes, requested.bytes);
  }
}

export function createUsageService(deps: { db: Db; logger: Logger; metrics?: Pick<Metrics, 'usageDrift'> }) {
  const { db, logger, metrics } = deps;

  return {
    async get(project: Project): Promise<Usage> {
      const row = await findUsage(db, project.id);
      const held = totals(row);
      const bucket = (
        status: 'uploading' | 'processing' | 'ready' | 'failed' | 'quarantined' | 'deleted',
      ) => ({
        files: row[`${status}_files`],
        bytes: row[`${status}_bytes`],
      });
      return {
        project_id: project.id,
        storage: {
          quota_bytes: project.settings.max_storage_bytes ?? null,
          used_bytes: held.usedBytes,
          reserved_bytes: held.reservedBytes,
        },
        files: {
          quota: project.settings.max_files ?? null,
          used: held.files,
          by_status: {
            uploading: bucket('uploading'),
            processing: bucket('processing'),
            ready: bucket('ready'),
            failed: bucket('failed'),
            quarantined: bucket('quarantined'),
            deleted: bucket('deleted'),
          },
        },
        versions: { bytes: row.versions_bytes, reserved_bytes: row.versions_reserved_bytes },
      };
    },

    /** Moves the deltas the triggers appended into each project's row, so that reading it stays cheap. */
    fold: () => foldUsage(db),

    /**
     * Recomputes every project's numbers from its files, versions and new contents, and corrects the
     * kept ones where they drifted (they should not: only a change made around Coffer, or a defect,
     * makes them drift). The correction is added, not written over, so changes made meanwhile stay
     * counted; passes run one after the other in the whole deployment.
     */
    async reconcile(): Promise<Drift> {
      const corrected = await db.tx(async (q) => {
        // A second pass waits for the first, then finds what the first corrected already corrected.
        await lockReconcile(q);
        await foldUsage(q);
        const drift = await findDrift(q);
        for (const delta of drift) await addToUsage(q, delta);
        return drift;
      });
      const drift: Drift = { projects: corrected.length, files: 0, bytes: 0 };
      for (const delta of corrected) {
        const changed = Object.fromEntries(COUNTERS.filter((c) => delta[c] !== 0).map((c) => [c, delta[c]]));
        logger.warn({ project_id: delta.project_id, drift: changed }, 'project usage drifted; corrected');
        for (const counter of COUNTERS) {
          drift[counter.endsWith('_files') ? 'files' : 'bytes'] += Math.abs(delta[counter]);
        }
      }
      metrics?.usageDrift.inc({ unit: 'files' }, drift.files);
      metrics?.usageDrift.inc({ unit: 'bytes' }, drift.bytes);
      return drift;
    },
  };
}

export type UsageService = ReturnType<typeof createUsageService>;
