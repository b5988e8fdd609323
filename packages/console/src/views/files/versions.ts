/** A file's versions (newest first), each downloadable and restorable. */
import { type FileObject, type FileVersion, isCofferError } from '@coffer/client';
import { type Context, projectHash } from '../../lib/context.ts';
import { h, replace } from '../../lib/dom.ts';
import { describe } from '../../lib/errors.ts';
import { bytes, when } from '../../lib/format.ts';
import { busy, button, confirmDialog, notice } from '../../lib/ui.ts';

/** Sends the browser to a presigned URL: it is served as an attachment, so it downloads. */
export function download(url: string): void {
  const link = h('a', { href: url, download: '', rel: 'noopener', hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
}

export function versionsSection(
  context: Context,
  projectId: string,
  file: FileObject,
  restored: (file: FileObject) => void,
): HTMLElement {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const { client } = context;

  const row = (version: FileVersion, latest: boolean) => {
    const get = button('Download', async () => {
      try {
        const { url } = await busy(get, () => client.versions.downloadUrl(projectId, file.id, version.id));
        download(url);
      } catch (error) {
        if (!context.expired(error)) body.prepend(notice('error', describe(error)));
      }
    });
    get.setAttribute('aria-label', `Download version ${version.version_number}`);
    const restore = button('Restore', async () => {
      const sure = await confirmDialog({
        title: `Restore version ${version.version_number}?`,
        body: `${file.filename} gets the content of version ${version.version_number} (${bytes(version.size_bytes)}, ${version.content_type}); this is recorded as a new version.`,
        confirm: 'Restore',
      });
      if (!sure) return;
      try {
        const updated = await busy(restore, () => client.versions.restore(projectId, file.id, version.id));
        restored(updated);
      } catch (error) {
        if (!context.expired(error)) body.prepend(notice('error', describe(error)));
      }
    });
    restore.setAttribute('aria-label', `Restore version ${version.version_number}`);
    const origin =
      version.reason === 'restore'
        ? `restored${version.source_version_id ? ` from ${version.source_version_id}` : ''}`
        : 'uploaded';
    return h(
      'li',
      { class: 'version' },
      h(
        'div',
        null,
        h('strong', null, `Version ${version.version_number}`),
        latest ? ' (current)' : '',
        h(
          'span',
          { class: 'muted block' },
          `${origin} · ${bytes(version.size_bytes)} · ${version.content_type}`,
        ),
        h('span', { class: 'muted block', title: version.created_at }, when(version.created_at)),
      ),
      h('div', { class: 'actions' }, get, latest ? null : restore),
    );
  };

  async function load() {
    try {
      const { items } = await client.versions.list(projectId, file.id);
      replace(
        body,
        items.length
          ? h('ul', { class: 'versions' }, ...items.map((version, index) => row(version, index === 0)))
          : h('p', { class: 'muted' }, 'No versions yet.'),
      );
    } catch (error) {
      if (context.expired(error)) return;
      if (isCofferError(error, 'VERSIONING_DISABLED')) {
        replace(
          body,
          h(
            'p',
            { class: 'muted' },
            'Versioning is off for this project. Turn it on in ',
            h('a', { href: projectHash(projectId, 'settings') }, 'Settings'),
            ' to keep every upload of this file.',
          ),
        );
      } else replace(body, notice('error', describe(error)));
    }
  }

  void load();
  return h('section', { class: 'editor', 'aria-label': 'Versions' }, h('h3', null, 'Versions'), body);
}
