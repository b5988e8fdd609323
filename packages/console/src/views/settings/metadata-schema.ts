/** The project's metadata schema (JSON Schema 2020-12): what enforce_schema checks metadata against. */
import { isCofferError, type MetadataSchema } from '@coffer/client';
import type { Context } from '../../lib/context.ts';
import { h } from '../../lib/dom.ts';
import { describe } from '../../lib/errors.ts';
import { when } from '../../lib/format.ts';
import { busy, button, confirmDialog, field, input, noticeArea, section } from '../../lib/ui.ts';

const EXAMPLE = { type: 'object', properties: { album: { type: 'string' } }, required: [] };

export function metadataSchemaSection(context: Context, projectId: string): HTMLElement {
  const { client } = context;
  const notices = noticeArea();
  const text = h('textarea', { rows: 8, spellcheck: false, class: 'code' });
  const schema = field(
    'Schema (JSON Schema 2020-12)',
    text,
    'Checked on metadata writes when “Enforce the metadata schema” is on.',
  );
  const active = field('Active', input({ type: 'checkbox', checked: true }));
  const state = h('p', { class: 'muted' });
  const save = h('button', { type: 'submit', class: 'button primary' }, 'Save schema');
  const remove = button(
    'Remove schema',
    async () => {
      const sure = await confirmDialog({
        title: 'Remove the metadata schema?',
        body: 'Metadata is then no longer checked.',
        confirm: 'Remove',
        danger: true,
      });
      if (!sure) return;
      try {
        await busy(remove, () => client.metadataSchema.delete(projectId));
        show(undefined);
        notices.show('success', 'Schema removed.');
      } catch (error) {
        if (!context.expired(error)) notices.error(error);
      }
    },
    'danger',
  );

  function show(stored: MetadataSchema | undefined) {
    text.value = JSON.stringify(stored?.schema ?? EXAMPLE, null, 2);
    active.control.checked = stored?.is_active ?? true;
    remove.hidden = !stored;
    state.textContent = stored
      ? `Saved ${when(stored.updated_at)}.`
      : 'No schema yet: the example below is not saved.';
  }

  const form = h(
    'form',
    {
      novalidate: true,
      onsubmit: async (event: SubmitEvent) => {
        event.preventDefault();
        notices.clear();
        schema.setError(undefined);
        let parsed: unknown;
        try {
          parsed = JSON.parse(text.value);
        } catch (error) {
          return schema.setError(`This is not valid JSON: ${describe(error)}`);
        }
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
          return schema.setError('A schema is a JSON object.');
        try {
          const stored = await busy(save, () =>
            client.metadataSchema.put(projectId, {
              schema: parsed as Record<string, unknown>,
              is_active: active.control.checked,
            }),
          );
          show(stored);
          notices.show('success', 'Schema saved.');
        } catch (error) {
          if (!context.expired(error)) schema.setError(describe(error));
        }
      },
    },
    state,
    schema.element,
    active.element,
    notices.element,
    h('div', { class: 'actions' }, save, remove),
  );

  client.metadataSchema.get(projectId).then(show, (error: unknown) => {
    if (context.expired(error)) return;
    if (isCofferError(error, 'NOT_FOUND')) show(undefined);
    else notices.error(error);
  });
  return section('Metadata schema', form);
}
