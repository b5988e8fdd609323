import { FILE_STATUSES, type FileStatus } from './rules.ts';

/** Where a file can go: one of its statuses, or deleted (soft: `deleted_at` is set, the status kept). */
export type FileTarget = FileStatus | 'deleted';

/**
 * The file's life, in one table: every status write is a guarded update from one of these states
 * to one it lists (`… WHERE status = <from>`), so a race can never skip or undo a state.
 *
 *   uploading ──► processing ──► ready | failed | quarantined
 *       │             (scan and MIME check; a failed scan_unavailable file may be scanned again)
 *       ├──► ready    (no scan: at confirm or multipart complete)
 *       └──► failed   (aborted, expired or abandoned)
 *   any state ──► deleted (unless under legal hold)
 */
export const FILE_TRANSITIONS: Readonly<Record<FileStatus, readonly FileTarget[]>> = {
  uploading: ['processing', 'ready', 'failed', 'deleted'],
  processing: ['ready', 'failed', 'quarantined', 'deleted'],
  ready: ['deleted'],
  failed: ['processing', 'deleted'],
  quarantined: ['deleted'],
};

export const FILE_TARGETS: readonly FileTarget[] = [...FILE_STATUSES, 'deleted'];

export const canTransition = (from: FileStatus, to: FileTarget): boolean =>
  FILE_TRANSITIONS[from].includes(to);

/** A transition the table does not list: a bug in the caller, never the client's doing. */
export class IllegalTransitionError extends Error {
  constructor(from: FileStatus, to: FileTarget) {
    super(`A file cannot go from ${from} to ${to}`);
    this.name = 'IllegalTransitionError';
  }
}

export function checkTransition(from: FileStatus, to: FileTarget): void {
  if (!canTransition(from, to)) throw new IllegalTransitionError(from, to);
}
