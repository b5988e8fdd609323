/**
 * A file's panel: every field, an image preview, tags and metadata editing, move, legal hold,
 * delete and versions.
 */
import type { FileObject } from '@coffer/client';
import type { Context } from '../../lib/context.ts';
import { h, replace } from '../../lib/dom.ts';
import { describe } from '../../lib/errors.ts';
import { bytes, count, when } from '../../lib/format.ts';
import { busy, button, confirmDialog, field, input, noticeArea } from '../../lib/ui.ts';
import { metadataEditor, tagsEditor } from './editors.ts';
import { fileById } from './lookup.ts';
import { statusBadge } from './status.ts';
import { hasThumbnail } from './thumbnail.ts';
import { pickFolder } from './tree.ts';
import { download, versionsSection } from './versions.ts';

/** How long a preview's URL lives: long enough to load the image, no longer. */
const PREVIEW_TTL_SECONDS = 60;
/** The preview's rendition fits in this square (twice the panel's width, for high-density screens). */
const PREVIEW_SIDE = 640;

/** Fields in the order a person looks for them; fields not named here follow, by their own name. */
const LABELS: Record<string, string> = {
  filename: 'Name',
  status: 'Status',
  id: 'ID',
  content_type: 'Content type',
  category: 'Category',
  size_bytes: 'Size',
  folder_id: 'Folder',
  checksum_sha256: 'SHA-256',
  storage_key: 'Storage key',
  owner_user_id: 'Owner user',
  owner_org_id: 'Owner organization',
  legal_hold: 'Legal hold',
  failure_reason: 'Failure reason',
  scan_signature: 'Scan signature',
  project_id: 'Project',
  created_at: 'Created',
  updated_at: 'Updated',
  deleted_at: 'Deleted',
};
/** Identifiers and digests, set in a monospace font. */
const CODES = new Set([
  'id',
  'storage_key',
  'checksum_sha256',
  'project_id',
  'owner_user_id',
  'owner_org_id',
]);
/** Shown by their own editors rather than in the list of fields. */
const EDITED = new Set(['tags', 'metadata']);
const TIMES = new Set(['created_at', 'updated_at', 'deleted_at']);

function shown(name: string, value: unknown): string {
  if (value === null || value === undefined || value === '') return '—';
  if (name === 'size_bytes' && typeof value === 'number') return `${bytes(value)} (${count(value)} bytes)`;
  if (TIMES.has(name) && typeof value === 'string') return when(value);
  if (typeof value === 'boolean') return value ? 'Yes' : 'No';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

export interface DetailOptions {
  changed(file: FileObject): void;
  deleted(file: FileObject): void;
  close(): void;
}

export interface Detail {
  element: HTMLElement;
  fileId: string;
  /** A newer state of the file (from the list's polling). */
  show(file: FileObject): void;
}

export function fileDetail(
  context: Context,
  projectId: string,
  fileId: string,
  options: DetailOptions,
): Detail {
  const { client } = context;
  const element = h('div', { class: 'detail-body' }, h('p', { class: 'muted' }, 'Loading…'));
  const notices = noticeArea();
  let current: FileObject | undefined;

  /** Everything but the editors, which keep what is being typed when the file changes around them. */
  const summary = h('div');
  const previewHolder = h('div');
  const editors = h('div');

  /** The folder's path in place of its id, once known. */
  function folderValue(folderId: string | null) {
    if (folderId === null) return h('dd', null, 'Project root');
    const value = h('dd', { class: 'value' }, folderId);
    client.folders.get(projectId, folderId).then(
      (folder) => {
        value.textContent = `${folder.path} · ${folder.id}`;
      },
      () => undefined, // the id stays
    );
    return value;
  }

  function fields(file: FileObject) {
    const values = file as unknown as Record<string, unknown>;
    const valueFor = (name: string) => {
      if (name === 'status') return h('dd', null, statusBadge(file));
      if (name === 'folder_id') return folderValue(file.folder_id);
      return h('dd', { class: CODES.has(name) ? 'value' : null }, shown(name, values[name]));
    };
    const known = Object.keys(LABELS).filter((name) => name in file);
    const others = Object.keys(file).filter((name) => !(name in LABELS) && !EDITED.has(name));
    const names = [...known, ...others];
    return h(
      'dl',
      { class: 'fields' },
      ...names.flatMap((name) => [h('dt', null, LABELS[name] ?? name), valueFor(name)]),
    );
  }

  function preview(file: FileObject) {
    if (!file.content_type.startsWith('image/') || file.status !== 'ready') return null;
    const frame = h('figure', { class: 'preview' }, h('figcaption', { class: 'muted' }, 'Loading preview…'));
    // A rendition: a bounded, re-encoded copy (EXIF orientation applied) rather than the whole original.
    const rendition = hasThumbnail(file)
      ? ({ width: PREVIEW_SIDE, height: PREVIEW_SIDE, fit: 'inside' } as const)
      : undefined;
    client.files.downloadUrl(projectId, file.id, { ttl: PREVIEW_TTL_SECONDS, rendition }).then(
      ({ url }) => {
        const image = h('img', { alt: `Preview of ${file.filename}`, decoding: 'async' });
        image.addEventListener('load', () => frame.querySelector('figcaption')?.remove());
        image.addEventListener('error', () => {
          replace(frame, h('figcaption', { class: 'muted' }, 'The browser could not show this image.'));
        });
        image.src = url;
        frame.prepend(image);
      },
      (error: unknown) => {
        if (!context.expired(error)) replace(frame, h('figcaption', { class: 'muted' }, describe(error)));
      },
    );
    return frame;
  }

  function actions(file: FileObject) {
    const get = button('Download', async () => {
      try {
        download((await busy(get, () => client.files.downloadUrl(projectId, file.id))).url);
      } catch (error) {
        if (!context.expired(error)) notices.error(error);
      }
    });
    get.disabled = file.status !== 'ready';
    const move = button('Move', async () => {
      const target = await pickFolder(context, projectId, file.filename);
      if (target === undefined) return;
      await run(move, () => client.files.move(projectId, file.id, target), 'Moved.');
    });
    const hold = file.legal_hold
      ? button('Release legal hold', async () => {
          const sure = await confirmDialog({
            title: 'Release the legal hold?',
            body: `${file.filename} can then be deleted again.`,
            confirm: 'Release',
          });
          if (sure)
            await run(hold, () => client.files.releaseLegalHold(projectId, file.id), 'Legal hold released.');
        })
      : button('Place legal hold', async () => {
          const reason = field('Reason (optional)', input({ maxLength: 1000, autocomplete: 'off' }));
          const sure = await confirmDialog({
            title: `Place ${file.filename} under legal hold?`,
            body: [h('p', null, 'While it holds, the file cannot be deleted.'), reason.element],
            confirm: 'Place hold',
          });
          const text = reason.control.value.trim();
          if (sure)
            await run(
              hold,
              () => client.files.setLegalHold(projectId, file.id, text || undefined),
              'Legal hold placed.',
            );
        });
    const remove = button(
      'Delete',
      async () => {
        const sure = await confirmDialog({
          title: `Delete ${file.filename}?`,
          body: 'It leaves every list and download at once; its bytes are erased later. This cannot be undone here.',
          confirm: 'Delete',
          danger: true,
        });
        if (!sure) return;
        try {
          options.deleted(await busy(remove, () => client.files.delete(projectId, file.id)));
        } catch (error) {
          if (!context.expired(error)) notices.error(error);
        }
      },
      'danger',
    );
    remove.disabled = file.legal_hold;
    if (file.legal_hold) remove.title = 'A file under legal hold cannot be deleted';
    if (file.status === 'quarantined') {
      // A quarantined file may be released from a hold (so that it can be deleted), never newly held.
      return h('div', { class: 'actions wrap' }, file.legal_hold ? hold : null, remove);
    }
    return h('div', { class: 'actions wrap' }, get, move, hold, remove);
  }

  async function run(control: HTMLButtonElement, work: () => Promise<FileObject>, done: string) {
    notices.clear();
    try {
      const updated = await busy(control, work);
      show(updated, true);
      notices.show('success', done);
      options.changed(updated);
    } catch (error) {
      if (!context.expired(error)) notices.error(error);
    }
  }

  function show(file: FileObject, rebuildEditors = false) {
    const first = current === undefined;
    const previewChanged = current?.status !== file.status || current?.content_type !== file.content_type;
    current = file;
    replace(summary, actions(file), fields(file));
    if (first || previewChanged) replace(previewHolder, preview(file));
    const wasQuarantined = editors.dataset.quarantined === 'true';
    if (file.status === 'quarantined') {
      // Nothing but a delete (and releasing a hold) is allowed on it: no editor would be heard.
      if (!wasQuarantined)
        replace(
          editors,
          h('p', { class: 'notice info' }, 'This file is quarantined: it can only be deleted.'),
        );
      editors.dataset.quarantined = 'true';
    } else if (first || rebuildEditors || wasQuarantined) {
      editors.dataset.quarantined = 'false';
      const saved = (updated: FileObject) => {
        show(updated);
        options.changed(updated);
      };
      const editorOptions = { context, projectId, file, saved };
      replace(
        editors,
        tagsEditor(editorOptions),
        metadataEditor(editorOptions),
        versionsSection(context, projectId, file, (restored) => {
          show(restored, true);
          options.changed(restored);
          notices.show('success', 'Version restored.');
        }),
      );
    }
    if (first) {
      replace(
        element,
        h(
          'header',
          { class: 'detail-head' },
          h('h2', { id: 'detail-title', class: 'detail-title' }, file.filename),
          button('Close', () => options.close(), 'quiet small', { 'aria-label': 'Close the file panel' }),
        ),
        notices.element,
        previewHolder,
        summary,
        editors,
      );
    } else {
      element.querySelector('#detail-title')!.textContent = file.filename;
    }
  }

  fileById(client, projectId, fileId).then(show, (error: unknown) => {
    if (context.expired(error)) return;
    replace(
      element,
      h(
        'header',
        { class: 'detail-head' },
        h('h2', { class: 'detail-title' }, 'File'),
        button('Close', () => options.close(), 'quiet small'),
      ),
      h('p', { class: 'notice error', role: 'alert' }, describe(error)),
    );
  });

  return {
    element,
    fileId,
    show(file) {
      if (current && file.updated_at !== current.updated_at) show(file);
    },
  };
}
