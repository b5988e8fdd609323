/**
 * Webhooks: the list, a form to create one (its signing secret shown once), editing its events,
 * URL and state, deleting it, and the log of its deliveries.
 */
import type { Webhook, WebhookEvent } from '@coffer/client';
import { type Context, projectHash, type Route, type View } from '../lib/context.ts';
import { h, replace } from '../lib/dom.ts';
import { describe, fieldOf } from '../lib/errors.ts';
import { when } from '../lib/format.ts';
import {
  busy,
  button,
  confirmDialog,
  emptyState,
  type Field,
  field,
  input,
  notice,
  noticeArea,
  secretBox,
  section,
  table,
} from '../lib/ui.ts';
import { deliveriesLog } from './webhooks/deliveries.ts';

const EVENTS = [
  'file.uploaded',
  'file.ready',
  'file.failed',
  'file.quarantined',
  'file.deleted',
] as const satisfies readonly WebhookEvent[];

interface WebhookForm {
  element: HTMLElement;
  url: Field<HTMLInputElement>;
  active: Field<HTMLInputElement>;
  events(): WebhookEvent[];
  setEventsError(message: string | undefined): void;
  /** Shows a refusal of the API on the field it names, else answers false. */
  showOnField(error: unknown): boolean;
}

/** URL, events (checkboxes) and whether it is active; filled from `webhook` when editing. */
function webhookForm(webhook?: Webhook): WebhookForm {
  const url = field(
    'Endpoint URL',
    input({
      type: 'url',
      value: webhook?.url ?? '',
      placeholder: 'https://example.com/hooks/coffer',
      required: true,
    }),
    'HTTPS. Every delivery is signed with the webhook’s secret (x-coffer-signature).',
  );
  const boxes = EVENTS.map((event) => {
    const box = input({
      type: 'checkbox',
      value: event,
      checked: webhook ? webhook.events.includes(event) : true,
    });
    return { event, box, label: h('label', { class: 'check' }, box, ' ', event) };
  });
  const eventsError = h('p', { class: 'field-error', hidden: true, role: 'alert' });
  const active = field('Active', input({ type: 'checkbox', checked: webhook?.is_active ?? true }));
  const events = () => boxes.filter(({ box }) => box.checked).map(({ event }) => event);
  const setEventsError = (message: string | undefined) => {
    eventsError.textContent = message ?? '';
    eventsError.hidden = message === undefined;
  };
  return {
    element: h(
      'div',
      { class: 'form-grid' },
      url.element,
      h(
        'fieldset',
        { class: 'field' },
        h('legend', null, 'Events'),
        ...boxes.map(({ label }) => label),
        eventsError,
      ),
      active.element,
    ),
    url,
    active,
    events,
    setEventsError,
    showOnField(error) {
      const name = fieldOf(error);
      if (name === 'url') url.setError(describe(error));
      else if (name === 'events') setEventsError(describe(error));
      else return false;
      return true;
    },
  };
}

export function webhooksView(context: Context, route: Route): View {
  const projectId = route.projectId!;
  const { client } = context;
  const notices = noticeArea();
  const listHolder = h('div', { 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading…'));
  const created = h('div');
  const logHolder = h('div');
  let log: View | undefined;
  let hooks: Webhook[] = [];

  const createForm = webhookForm();
  const createButton = h('button', { type: 'submit', class: 'button primary' }, 'Create webhook');
  const formNotices = noticeArea();
  const form = h(
    'form',
    {
      novalidate: true,
      onsubmit: async (event: SubmitEvent) => {
        event.preventDefault();
        formNotices.clear();
        created.replaceChildren();
        createForm.url.setError(undefined);
        createForm.setEventsError(undefined);
        if (!createForm.events().length) return createForm.setEventsError('Choose at least one event.');
        try {
          const hook = await busy(createButton, () =>
            client.webhooks.create(projectId, {
              url: createForm.url.control.value.trim(),
              events: createForm.events(),
              is_active: createForm.active.control.checked,
            }),
          );
          replace(
            created,
            notice('success', `Webhook created for ${hook.url}.`),
            secretBox(
              'Signing secret',
              hook.signing_secret,
              'Copy it now: it is shown only this once. Verify each delivery’s x-coffer-signature with it.',
            ),
          );
          createForm.url.control.value = '';
          await load();
        } catch (error) {
          if (!context.expired(error) && !createForm.showOnField(error)) formNotices.error(error);
        }
      },
    },
    createForm.element,
    formNotices.element,
    h('div', { class: 'actions' }, createButton),
  );

  function editDialog(hook: Webhook) {
    const edit = webhookForm(hook);
    const save = h('button', { type: 'submit', class: 'button primary' }, 'Save');
    const problems = noticeArea();
    const dialog = h('dialog', { class: 'dialog', 'aria-label': `Edit the webhook of ${hook.url}` });
    const close = () => {
      dialog.close();
      dialog.remove();
    };
    replace(
      dialog,
      h(
        'form',
        {
          novalidate: true,
          onsubmit: async (event: SubmitEvent) => {
            event.preventDefault();
            problems.clear();
            edit.url.setError(undefined);
            edit.setEventsError(undefined);
            if (!edit.events().length) return edit.setEventsError('Choose at least one event.');
            try {
              await busy(save, () =>
                client.webhooks.update(projectId, hook.id, {
                  url: edit.url.control.value.trim(),
                  events: edit.events(),
                  is_active: edit.active.control.checked,
                }),
              );
              close();
              notices.show('success', 'Webhook saved.');
              await load();
            } catch (error) {
              if (!context.expired(error) && !edit.showOnField(error)) problems.error(error);
            }
          },
        },
        h('h2', null, 'Edit webhook'),
        edit.element,
        problems.element,
        h('div', { class: 'actions' }, button('Cancel', close), save),
      ),
    );
    dialog.addEventListener('cancel', (event) => {
      event.preventDefault();
      close();
    });
    document.body.append(dialog);
    dialog.showModal();
  }

  function row(hook: Webhook) {
    const remove = button(
      'Delete',
      async () => {
        const sure = await confirmDialog({
          title: 'Delete this webhook?',
          body: `${hook.url} gets no more deliveries; those waiting for a retry are cancelled.`,
          confirm: 'Delete',
          danger: true,
        });
        if (!sure) return;
        try {
          await busy(remove, () => client.webhooks.delete(projectId, hook.id));
          notices.show('success', 'Webhook deleted.');
          if (route.id === hook.id) context.navigate(projectHash(projectId, 'webhooks'));
          await load();
        } catch (error) {
          if (!context.expired(error)) notices.error(error);
        }
      },
      'danger small',
    );
    return h(
      'tr',
      { class: route.id === hook.id ? 'selected' : null },
      h('td', { class: 'value' }, hook.url),
      h('td', null, hook.events.join(', ')),
      h('td', null, hook.is_active ? 'Active' : 'Paused'),
      h('td', null, when(hook.created_at)),
      h(
        'td',
        { class: 'row-actions' },
        h('a', { class: 'button small', href: projectHash(projectId, 'webhooks', hook.id) }, 'Deliveries'),
        button('Edit', () => editDialog(hook), 'small'),
        remove,
      ),
    );
  }

  async function load() {
    try {
      hooks = (await client.webhooks.list(projectId)).items;
      listHolder.setAttribute('aria-busy', 'false');
      replace(
        listHolder,
        table(
          ['URL', 'Events', 'State', 'Created', ''],
          hooks.map(row),
          emptyState(
            'No webhooks yet',
            'Create one below to be told when files are uploaded, ready or deleted.',
          ),
        ),
      );
    } catch (error) {
      if (!context.expired(error)) replace(listHolder, notice('error', describe(error)));
    }
  }

  function showLog(webhookId: string | undefined) {
    log?.destroy?.();
    log = undefined;
    logHolder.replaceChildren();
    if (!webhookId) return;
    log = deliveriesLog(context, projectId, webhookId);
    logHolder.append(log.element);
  }

  const element = h(
    'div',
    { class: 'page' },
    h('h1', null, 'Webhooks'),
    notices.element,
    section('Endpoints', listHolder),
    logHolder,
    section('New webhook', created, form),
  );
  void load();
  showLog(route.id);
  return {
    element,
    update(next) {
      route = next;
      showLog(next.id);
      void load();
      return true;
    },
    destroy: () => log?.destroy?.(),
  };
}
