/**
 * Uploads: files dropped or picked, several at once, each with its progress and a cancel button.
 * The SDK picks a single PUT or parallel parts by size; the row then follows the file's status
 * (processing → ready, or quarantined / failed with the reason).
 */
import { type FileObject, isCofferError } from '@coffer/client';
import type { Context } from '../../lib/context.ts';
import { h } from '../../lib/dom.ts';
import { describe } from '../../lib/errors.ts';
import { bytes } from '../../lib/format.ts';
import { button } from '../../lib/ui.ts';
import { statusText } from './status.ts';

/** Files sent at once; the others wait their turn. */
const PARALLEL_FILES = 3;

interface Row {
  file: File;
  element: HTMLLIElement;
  progress: HTMLProgressElement;
  state: HTMLElement;
  action: HTMLElement;
  abort: AbortController;
  /** Set once the upload is confirmed: the row then follows the file's status. */
  fileId?: string;
  done: boolean;
}

export interface Uploader {
  element: HTMLElement;
  add(files: Iterable<File>): void;
  /** A newer state of an uploaded file (the list polls files still processing). */
  update(file: FileObject): void;
  /** The uploaded files still on their way to a final status. */
  waiting(): string[];
  destroy(): void;
}

export function uploader(
  context: Context,
  projectId: string,
  options: { folderId(): string | null; uploaded(file: FileObject): void },
): Uploader {
  const rows: Row[] = [];
  const queue: Row[] = [];
  let running = 0;

  const picker = h('input', {
    type: 'file',
    multiple: true,
    class: 'visually-hidden',
    tabIndex: -1,
    'aria-hidden': 'true',
    onchange: () => {
      if (picker.files) add(picker.files);
      picker.value = '';
    },
  });
  const list = h('ul', { class: 'upload-list', 'aria-label': 'Uploads' });
  const clearDone = button(
    'Clear finished',
    () => {
      for (const row of rows.filter((r) => r.done && !waitingFor(r))) {
        row.element.remove();
        rows.splice(rows.indexOf(row), 1);
      }
      clearDone.hidden = !rows.some((r) => r.done);
    },
    'quiet small',
    { hidden: true },
  );
  const element = h(
    'section',
    { class: 'uploader', 'aria-label': 'Upload files' },
    h(
      'div',
      { class: 'drop-zone' },
      h('span', null, 'Drop files anywhere here, or '),
      button('Choose files', () => picker.click(), 'primary small', { id: 'choose-files' }),
      picker,
    ),
    list,
    clearDone,
  );

  const waitingFor = (row: Row) => row.fileId !== undefined && !row.done;

  function settle(row: Row, text: string, kind: string) {
    row.done = true;
    row.state.textContent = text;
    row.element.dataset.state = kind;
    row.action.replaceChildren();
    clearDone.hidden = false;
  }

  function follow(row: Row, file: FileObject) {
    row.state.textContent = statusText(file);
    row.element.dataset.state = file.status;
    if (file.status === 'processing' || file.status === 'uploading') return;
    settle(row, statusText(file), file.status);
  }

  async function send(row: Row) {
    running += 1;
    row.state.textContent = 'Uploading…';
    row.element.dataset.state = 'uploading';
    try {
      const file = await context.client.upload(projectId, row.file, {
        folderId: options.folderId(),
        signal: row.abort.signal,
        onProgress: ({ loaded, total }) => {
          row.progress.max = total || 1;
          row.progress.value = loaded;
          row.state.textContent = `Uploading ${total ? Math.floor((loaded / total) * 100) : 100}%`;
        },
      });
      row.progress.value = row.progress.max;
      row.fileId = file.id;
      row.action.replaceChildren();
      follow(row, file);
      options.uploaded(file);
    } catch (error) {
      if (isCofferError(error, 'ABORTED')) settle(row, 'Cancelled', 'cancelled');
      else if (!context.expired(error)) settle(row, `Failed: ${describe(error)}`, 'failed');
    } finally {
      running -= 1;
      next();
    }
  }

  function next() {
    while (running < PARALLEL_FILES && queue.length) void send(queue.shift()!);
  }

  function add(files: Iterable<File>) {
    for (const file of files) {
      const progress = h('progress', { max: file.size || 1, value: 0 });
      progress.setAttribute('aria-label', `Progress of ${file.name}`);
      const state = h('span', { class: 'upload-state' }, 'Waiting');
      const action = h('span', { class: 'upload-action' });
      const row: Row = {
        file,
        progress,
        state,
        action,
        abort: new AbortController(),
        done: false,
        element: h(
          'li',
          { class: 'upload-row' },
          h('span', { class: 'upload-name', title: file.name }, file.name),
          h('span', { class: 'upload-size' }, bytes(file.size)),
          progress,
          state,
          action,
        ),
      };
      const cancel = button('Cancel', () => {
        row.abort.abort();
        const waiting = queue.indexOf(row);
        if (waiting >= 0) {
          queue.splice(waiting, 1);
          settle(row, 'Cancelled', 'cancelled');
        }
      });
      cancel.setAttribute('aria-label', `Cancel the upload of ${file.name}`);
      action.append(cancel);
      rows.push(row);
      queue.push(row);
      list.append(row.element);
    }
    next();
  }

  return {
    element,
    add,
    update(file) {
      for (const row of rows) if (row.fileId === file.id && !row.done) follow(row, file);
    },
    waiting: () => rows.filter(waitingFor).map((row) => row.fileId!),
    destroy() {
      for (const row of rows) row.abort.abort();
    },
  };
}
