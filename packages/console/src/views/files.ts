/**
 * Files: the folder tree, the filters, one page of the list at a time (by cursor, so a project of
 * 100,000 files opens as fast as one of ten), uploads, and the panel of the file opened.
 */
import { type FileList, type FileObject, isCofferError } from '@coffer/client';
import { type Context, projectHash, type Route, type View } from '../lib/context.ts';
import { debounce, h, replace } from '../lib/dom.ts';
import { bytes, count, when } from '../lib/format.ts';
import { button, emptyState, noticeArea, select } from '../lib/ui.ts';
import { type Detail, fileDetail } from './files/detail.ts';
import { type FileFilters, filterBar } from './files/filters.ts';
import { fileById } from './files/lookup.ts';
import { isSettled, statusBadge } from './files/status.ts';
import { thumbnail } from './files/thumbnail.ts';
import { ALL_FILES, type FolderChoice, folderTree } from './files/tree.ts';
import { uploader } from './files/upload.ts';

const PAGE_SIZES = ['25', '50', '100', '200'] as const;
/** How often files on their way to a final status are asked about. */
const POLL_MS = 2000;
/** The largest page the list answers. */
const LIST_MAX = 200;
/** At most this many files that changed status are read again per round; the others next round. */
const REREAD_BATCH = 25;

export function filesView(context: Context, route: Route): View {
  const projectId = route.projectId!;
  const { client } = context;
  let filters: FileFilters = {};
  let folder: FolderChoice = ALL_FILES;
  let limit = 50;
  /** The cursor of each page up to the one shown (the first page has none). */
  let cursors: (string | undefined)[] = [undefined];
  let page: FileList | undefined;
  let loading: AbortController | undefined;
  let detail: Detail | undefined;
  /** The latest state known of each file uploaded here (the page keeps its own files). */
  const uploadedFiles = new Map<string, FileObject>();
  /** Files found deleted while polled: no longer asked about. */
  const gone = new Set<string>();

  const notices = noticeArea();
  const results = h('div', { class: 'results', 'aria-live': 'polite', 'aria-busy': 'true' });
  const summary = h('p', { class: 'page-summary' });
  const previous = button('Previous page', () => void go(-1), 'small');
  const next = button('Next page', () => void go(1), 'small');
  const pageSize = select(
    PAGE_SIZES.map((size) => [size, `${size} per page`] as const),
    String(limit),
    { 'aria-label': 'Files per page' },
  );
  pageSize.addEventListener('change', () => {
    limit = Number(pageSize.value);
    void restart();
  });
  const pager = h(
    'div',
    { class: 'pager' },
    summary,
    h('div', { class: 'actions' }, previous, next, pageSize),
  );
  const panel = h('aside', { class: 'detail', 'aria-labelledby': 'detail-title', hidden: true });

  const bar = filterBar((changed) => {
    filters = changed;
    void restart();
  });
  const tree = folderTree(context, projectId, {
    withAll: true,
    initial: ALL_FILES,
    onSelect: (choice) => {
      folder = choice;
      void restart();
    },
  });
  const uploads = uploader(context, projectId, {
    folderId: () => (folder.id && folder.id !== 'root' ? folder.id : null),
    uploaded: (file) => {
      uploadedFiles.set(file.id, file);
      if (cursors.length === 1) reloadSoon();
    },
  });
  const reloadSoon = debounce(() => void load(), 400);

  function row(file: FileObject): HTMLTableRowElement {
    const open = h(
      'a',
      { href: projectHash(projectId, 'files', file.id), class: 'file-link' },
      file.filename,
    );
    return h(
      'tr',
      { 'data-id': file.id, class: detail?.fileId === file.id ? 'selected' : null },
      h('td', { class: 'name' }, thumbnail(context, projectId, file), open),
      h('td', null, statusBadge(file)),
      h('td', null, file.category, h('span', { class: 'muted block' }, file.content_type)),
      h('td', { class: 'number' }, bytes(file.size_bytes)),
      h(
        'td',
        null,
        file.tags.length
          ? h('span', { class: 'tags' }, ...file.tags.map((t) => h('span', { class: 'chip' }, t)))
          : '',
      ),
      h('td', { title: file.created_at }, when(file.created_at)),
    );
  }

  function emptyResults() {
    if (bar.active())
      return emptyState(
        'No files match these filters',
        'Change or clear the filters to see more.',
        button('Clear filters', () => bar.clear()),
      );
    if (folder.id !== undefined)
      return emptyState('This folder holds no files', 'Drop files here to upload them into it.');
    return emptyState('No files yet', 'Drop files anywhere on this page, or choose files to upload.');
  }

  function render() {
    if (!page) return;
    results.setAttribute('aria-busy', 'false');
    if (page.items.length === 0) {
      replace(results, emptyResults());
    } else {
      replace(
        results,
        h(
          'table',
          { class: 'table files-table' },
          h('caption', { class: 'visually-hidden' }, `Files in ${folder.label}`),
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              ...['Name', 'Status', 'Type', 'Size', 'Tags', 'Created'].map((name) =>
                h('th', { scope: 'col', class: name === 'Size' ? 'number' : null }, name),
              ),
            ),
          ),
          h('tbody', null, ...page.items.map(row)),
        ),
      );
    }
    const first = (cursors.length - 1) * limit;
    summary.textContent = page.items.length
      ? `${count(first + 1)}–${count(first + page.items.length)} of ${count(page.total)} files`
      : `0 of ${count(page.total)} files`;
    previous.disabled = cursors.length === 1;
    next.disabled = !page.has_more;
  }

  async function load() {
    loading?.abort();
    const mine = new AbortController();
    loading = mine;
    results.setAttribute('aria-busy', 'true');
    notices.clear();
    try {
      page = await client.files.list(
        projectId,
        { ...filters, folder_id: folder.id, limit, cursor: cursors.at(-1) },
        { signal: mine.signal },
      );
      render();
    } catch (error) {
      if (mine.signal.aborted || context.expired(error)) return;
      results.setAttribute('aria-busy', 'false');
      notices.error(error);
    }
  }

  function restart() {
    cursors = [undefined];
    return load();
  }

  async function go(step: 1 | -1) {
    if (step === 1 && page?.next_cursor) cursors.push(page.next_cursor);
    else if (step === -1 && cursors.length > 1) cursors.pop();
    else return;
    await load();
    results.querySelector<HTMLElement>('.file-link')?.focus();
  }

  /** Puts a newer state of a file wherever it shows. */
  function updated(file: FileObject) {
    if (uploadedFiles.has(file.id)) uploadedFiles.set(file.id, file);
    uploads.update(file);
    if (detail?.fileId === file.id) detail.show(file);
    const index = page?.items.findIndex((item) => item.id === file.id) ?? -1;
    if (page && index >= 0) {
      page.items[index] = file;
      results.querySelector(`tr[data-id="${CSS.escape(file.id)}"]`)?.replaceWith(row(file));
    }
  }

  function open(fileId: string | undefined) {
    if (detail?.fileId === fileId) return;
    detail = undefined;
    panel.hidden = fileId === undefined;
    for (const selected of results.querySelectorAll('tr.selected')) selected.classList.remove('selected');
    if (!fileId) {
      panel.replaceChildren();
      return;
    }
    results.querySelector(`tr[data-id="${CSS.escape(fileId)}"]`)?.classList.add('selected');
    detail = fileDetail(context, projectId, fileId, {
      changed: updated,
      deleted: (file) => {
        context.navigate(projectHash(projectId, 'files'));
        notices.show('success', `${file.filename} was deleted.`);
        if (page) {
          page.items = page.items.filter((item) => item.id !== file.id);
          page.total = Math.max(0, page.total - 1);
          render();
        }
      },
      close: () => context.navigate(projectHash(projectId, 'files')),
    });
    replace(panel, detail.element);
  }

  /** Files on the page or just uploaded that are still uploading or processing, as last seen. */
  function unsettled(): Map<string, FileObject> {
    const files = new Map<string, FileObject>();
    for (const file of page?.items ?? []) if (!isSettled(file)) files.set(file.id, file);
    for (const fileId of uploads.waiting()) {
      const file = uploadedFiles.get(fileId);
      if (file) files.set(fileId, file);
    }
    for (const fileId of gone) files.delete(fileId);
    return files;
  }

  /**
   * Which of the `waiting` files last seen in `status` the server still lists in it: newest first,
   * down to the oldest of them at most, and stopping once all are found (one request but in rare
   * rounds).
   */
  async function stillIn(status: FileObject['status'], waiting: FileObject[]): Promise<FileObject[]> {
    const files = waiting.filter((file) => file.status === status);
    const missing = new Set(files.map((file) => file.id));
    const found: FileObject[] = [];
    const oldest = files.map((file) => file.created_at).sort()[0];
    const query = { status, date_from: oldest, limit: LIST_MAX };
    for await (const file of client.files.iterate(projectId, query)) {
      if (!missing.delete(file.id)) continue;
      found.push(file);
      if (missing.size === 0) break;
    }
    return found;
  }

  /**
   * One list request per status the unsettled files are in (usually just `processing`) rather than
   * one per file. Only a file missing from its status's answer has changed: it alone is read again.
   */
  async function poll() {
    const waiting = [...unsettled().values()];
    const changed = new Set(waiting.map((file) => file.id));
    try {
      for (const status of new Set(waiting.map((file) => file.status))) {
        for (const file of await stillIn(status, waiting)) {
          changed.delete(file.id);
          updated(file);
        }
      }
    } catch (error) {
      context.expired(error); // Signs out if the key stopped working; otherwise the next round asks again.
      return;
    }
    for (const fileId of [...changed].slice(0, REREAD_BATCH)) {
      try {
        updated(await fileById(client, projectId, fileId));
      } catch (error) {
        if (context.expired(error)) return;
        if (isCofferError(error, 'NOT_FOUND')) gone.add(fileId);
        // Otherwise unreachable for now: the next round or a reload tells.
      }
    }
  }
  let polling = false;
  const timer = setInterval(async () => {
    if (polling) return;
    polling = true;
    await poll().finally(() => {
      polling = false;
    });
  }, POLL_MS);

  const main = h(
    'section',
    { class: 'files-main', 'aria-label': 'Files' },
    h('div', { class: 'files-head' }, h('h1', null, 'Files'), bar.element),
    uploads.element,
    notices.element,
    results,
    pager,
  );
  const element = h(
    'div',
    { class: 'files-view' },
    h(
      'aside',
      { class: 'folders', 'aria-label': 'Folders' },
      h('h2', { class: 'side-title' }, 'Folders'),
      tree.element,
    ),
    main,
    panel,
  );

  // Files dropped anywhere on the view are uploaded into the folder shown.
  element.addEventListener('dragover', (event) => {
    if (!event.dataTransfer?.types.includes('Files')) return;
    event.preventDefault();
    element.classList.add('dragging');
  });
  element.addEventListener('dragleave', (event) => {
    if (event.target === element || !element.contains(event.relatedTarget as Node | null))
      element.classList.remove('dragging');
  });
  element.addEventListener('drop', (event) => {
    if (!event.dataTransfer?.files.length) return;
    event.preventDefault();
    element.classList.remove('dragging');
    uploads.add(event.dataTransfer.files);
  });
  // Escape closes the file's panel, wherever the focus is (a dialog takes its own Escape first).
  const onKey = (event: KeyboardEvent) => {
    if (event.key === 'Escape' && detail && !document.querySelector('dialog[open]'))
      context.navigate(projectHash(projectId, 'files'));
  };
  document.addEventListener('keydown', onKey);

  void load();
  open(route.id);

  return {
    element,
    update(next) {
      open(next.id);
      return true;
    },
    destroy() {
      document.removeEventListener('keydown', onKey);
      clearInterval(timer);
      loading?.abort();
      uploads.destroy();
    },
  };
}
