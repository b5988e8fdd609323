/** A file's status in words and as a badge, with the reason of a failed or quarantined file. */
import type { FileObject } from '@coffer/client';
import { h } from '../../lib/dom.ts';

const WORDS: Record<FileObject['status'], string> = {
  uploading: 'Uploading',
  processing: 'Processing',
  ready: 'Ready',
  failed: 'Failed',
  quarantined: 'Quarantined',
};

export const isSettled = (file: FileObject) => file.status !== 'uploading' && file.status !== 'processing';

/** Why a file is failed or quarantined, when the server says. */
export const reasonOf = (file: FileObject) =>
  [file.failure_reason, file.scan_signature].filter((part) => part).join(' · ') || undefined;

export function statusText(file: FileObject): string {
  const reason = reasonOf(file);
  return reason ? `${WORDS[file.status]}: ${reason}` : WORDS[file.status];
}

export function statusBadge(file: FileObject): HTMLElement {
  const reason = reasonOf(file);
  return h(
    'span',
    { class: 'status-cell' },
    h('span', { class: `badge ${file.status}` }, WORDS[file.status]),
    reason ? h('span', { class: 'reason' }, reason) : null,
  );
}
