/** The editors of a file's tags and metadata; a refusal is shown on the field it concerns. */
import type { FileObject } from '@coffer/client';
import type { Context } from '../../lib/context.ts';
import { h, replace } from '../../lib/dom.ts';
import { describe, schemaErrors } from '../../lib/errors.ts';
import { listOf } from '../../lib/format.ts';
import { busy, button, field, input } from '../../lib/ui.ts';

interface EditorOptions {
  context: Context;
  projectId: string;
  file: FileObject;
  saved(file: FileObject): void;
}

/** Tags as removable chips and a field to add more; saved together (the whole set is replaced). */
export function tagsEditor({ context, projectId, file, saved }: EditorOptions): HTMLElement {
  let tags = [...file.tags];
  const chips = h('ul', { class: 'chips', 'aria-label': 'Tags' });
  const adding = field(
    'Add tags',
    input({ autocomplete: 'off', placeholder: 'tag, another' }),
    'Press Enter to add; Save keeps them.',
  );
  const save = button('Save tags', () => void store(), 'primary small', { disabled: true });
  const status = h('span', { class: 'saved', role: 'status' });

  const changed = () => JSON.stringify(tags) !== JSON.stringify(file.tags);
  function render() {
    replace(
      chips,
      ...tags.map((tag) =>
        h(
          'li',
          { class: 'chip' },
          h('span', null, tag),
          button(
            '×',
            () => {
              tags = tags.filter((t) => t !== tag);
              render();
            },
            'chip-remove',
            { 'aria-label': `Remove tag ${tag}` },
          ),
        ),
      ),
    );
    if (!tags.length) chips.append(h('li', { class: 'muted' }, 'No tags'));
    save.disabled = !changed() && !adding.control.value.trim();
  }
  function takeTyped() {
    for (const tag of listOf(adding.control.value)) if (!tags.includes(tag)) tags.push(tag);
    adding.control.value = '';
    render();
  }
  adding.control.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') {
      event.preventDefault();
      takeTyped();
    }
  });
  adding.control.addEventListener('input', () => {
    save.disabled = !changed() && !adding.control.value.trim();
  });

  async function store() {
    takeTyped();
    adding.setError(undefined);
    status.textContent = '';
    try {
      const updated = await busy(save, () => context.client.files.setTags(projectId, file.id, tags));
      file = updated;
      tags = [...updated.tags];
      render();
      status.textContent = 'Saved';
      saved(updated);
    } catch (error) {
      if (!context.expired(error)) adding.setError(describe(error));
    }
  }

  render();
  return h(
    'section',
    { class: 'editor', 'aria-label': 'Tags' },
    h('h3', null, 'Tags'),
    chips,
    adding.element,
    h('div', { class: 'actions' }, save, status),
  );
}

/** Metadata as JSON text; saving replaces it. The project's schema errors appear under the field. */
export function metadataEditor({ context, projectId, file, saved }: EditorOptions): HTMLElement {
  const text = h('textarea', { rows: 6, spellcheck: false, class: 'code' });
  text.value = JSON.stringify(file.metadata, null, 2);
  const metadata = field('Metadata (JSON object)', text);
  const status = h('span', { class: 'saved', role: 'status' });
  const save = button('Save metadata', () => void store(), 'primary small');

  async function store() {
    metadata.setError(undefined);
    status.textContent = '';
    let value: unknown;
    try {
      value = JSON.parse(text.value.trim() || '{}');
    } catch (error) {
      metadata.setError(`This is not valid JSON: ${describe(error)}`);
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      metadata.setError('Metadata is a JSON object: { "key": "value" }.');
      return;
    }
    try {
      const updated = await busy(save, () =>
        context.client.files.setMetadata(projectId, file.id, value as Record<string, unknown>),
      );
      text.value = JSON.stringify(updated.metadata, null, 2);
      status.textContent = 'Saved';
      saved(updated);
    } catch (error) {
      if (context.expired(error)) return;
      metadata.setError([describe(error), ...schemaErrors(error)].join('\n'));
    }
  }

  return h(
    'section',
    { class: 'editor', 'aria-label': 'Metadata' },
    h('h3', null, 'Metadata'),
    metadata.element,
    h('div', { class: 'actions' }, save, status),
  );
}
