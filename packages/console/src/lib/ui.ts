/** The console's small kit: fields with their message, notices, dialogs, secrets shown once, tables. */
import { type Child, h, replace, uid } from './dom.ts';
import { describe } from './errors.ts';

type Control = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

export interface Field<C extends Control = Control> {
  element: HTMLElement;
  control: C;
  /** Shows `message` under the field and marks it invalid; undefined clears it. */
  setError(message: string | undefined): void;
}

/** A labelled control with a hint and a place for its error, tied together for screen readers. */
export function field<C extends Control>(label: string, control: C, hint?: string): Field<C> {
  control.id ||= uid('field');
  const error = h('p', { class: 'field-error', id: uid('error'), hidden: true });
  const hintLine = hint ? h('p', { class: 'hint', id: uid('hint') }, hint) : null;
  const describedBy = () => [hintLine?.id, error.hidden ? undefined : error.id].filter(Boolean).join(' ');
  control.setAttribute('aria-describedby', describedBy());
  const isToggle = control instanceof HTMLInputElement && control.type === 'checkbox';
  const element = isToggle
    ? h(
        'div',
        { class: 'field toggle' },
        h('label', { for: control.id }, control, ' ', label),
        hintLine,
        error,
      )
    : h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintLine, error);
  return {
    element,
    control,
    setError(message) {
      error.textContent = message ?? '';
      error.hidden = message === undefined;
      if (message === undefined) control.removeAttribute('aria-invalid');
      else control.setAttribute('aria-invalid', 'true');
      control.setAttribute('aria-describedby', describedBy());
    },
  };
}

export const input = (props: Record<string, unknown> = {}) => h('input', { type: 'text', ...props });

export function select(options: readonly (readonly [string, string])[], value = '', props = {}) {
  const element = h('select', props, ...options.map(([key, label]) => h('option', { value: key }, label)));
  element.value = value;
  return element;
}

/** A line that says how something went: `role=alert` for failures, `status` otherwise. */
export function notice(kind: 'error' | 'success' | 'info', text: string): HTMLElement {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** A place for one notice at a time. */
export function noticeArea() {
  const element = h('div', { class: 'notice-area' });
  return {
    element,
    show(kind: 'error' | 'success' | 'info', text: string) {
      replace(element, notice(kind, text));
    },
    error(error: unknown) {
      replace(element, notice('error', describe(error)));
    },
    clear() {
      element.replaceChildren();
    },
  };
}

/**
 * Disables `button` while `work` runs, and answers what it answers. A disabled button loses the
 * focus: it gets it back afterwards, so that a keyboard user stays where they were.
 */
export async function busy<T>(button: HTMLButtonElement, work: () => Promise<T>): Promise<T> {
  const focused = document.activeElement === button;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try {
    return await work();
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    if (focused && button.isConnected && document.activeElement === document.body) button.focus();
  }
}

export const button = (label: string, onclick: (event: MouseEvent) => void, kind = '', props = {}) =>
  h('button', { type: 'button', class: kind ? `button ${kind}` : 'button', onclick, ...props }, label);

/**
 * A modal dialog (native <dialog>: focus stays inside, Escape cancels). Answers true when the
 * person confirmed.
 */
export function confirmDialog(options: {
  title: string;
  body: Child;
  confirm: string;
  danger?: boolean;
}): Promise<boolean> {
  return new Promise((resolve) => {
    const titleId = uid('dialog-title');
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': titleId });
    const close = (answer: boolean) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    const cancel = button('Cancel', () => close(false));
    replace(
      dialog,
      h('h2', { id: titleId }, options.title),
      h('div', { class: 'dialog-body' }, options.body),
      h(
        'div',
        { class: 'actions' },
        cancel,
        button(options.confirm, () => close(true), options.danger ? 'danger' : 'primary'),
      ),
    );
    dialog.addEventListener('cancel', (event) => {
      event.preventDefault();
      close(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

/** Puts `text` on the clipboard; where the Clipboard API is refused, selects it in `fallback` and copies. */
async function copy(text: string, fallback: HTMLInputElement): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    fallback.select();
    if (!document.execCommand('copy')) throw new Error('Copying was refused: select the text and copy it.');
  }
}

/** A secret (an API key, a signing secret, a token) shown this once, with a copy button. */
export function secretBox(label: string, value: string, note: string): HTMLElement {
  const shown = input({ value, readOnly: true, class: 'secret', spellcheck: false, autocomplete: 'off' });
  const status = h('span', { class: 'copied', role: 'status' });
  const copyButton = button('Copy', async () => {
    try {
      await copy(value, shown);
      status.textContent = 'Copied';
    } catch (error) {
      status.textContent = describe(error);
    }
  });
  copyButton.setAttribute('aria-label', `Copy ${label}`);
  const { element } = field(label, shown, note);
  element.classList.add('secret-box');
  element.append(h('div', { class: 'actions' }, copyButton, status));
  return element;
}

/** A table of `rows` under `headers`; `empty` instead when there are none. */
export function table(headers: readonly string[], rows: readonly HTMLTableRowElement[], empty: Child) {
  if (rows.length === 0) return h('div', { class: 'empty' }, empty);
  return h(
    'table',
    { class: 'table' },
    h('thead', null, h('tr', null, ...headers.map((name) => h('th', { scope: 'col' }, name)))),
    h('tbody', null, ...rows),
  );
}

/** An empty state: what is missing, and what to do about it. */
export const emptyState = (title: string, text: string, ...actions: Child[]) =>
  h('div', { class: 'empty' }, h('p', { class: 'empty-title' }, title), h('p', null, text), ...actions);

/** A section of a page with its heading. */
export const section = (title: string, ...children: Child[]) =>
  h('section', { class: 'panel' }, h('h2', null, title), ...children);
