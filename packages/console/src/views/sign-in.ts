/** Sign-in with an API key or the admin key; a refused key shows the API's message. */
import type { View } from '../lib/context.ts';
import { h } from '../lib/dom.ts';
import { type Session, signIn } from '../lib/session.ts';
import { busy, field, input, notice, noticeArea } from '../lib/ui.ts';

export function signInView(reason: string | undefined, signedIn: (session: Session) => void): View {
  const key = field(
    'API key or admin key',
    input({ type: 'password', name: 'key', autocomplete: 'off', spellcheck: false, required: true }),
    'coffer_live_… or coffer_admin_…. Kept in this browser tab only: closing it signs you out.',
  );
  const notices = noticeArea();
  if (reason) notices.element.append(notice('info', reason));
  const submit = h('button', { type: 'submit', class: 'button primary' }, 'Sign in');
  const form = h(
    'form',
    {
      class: 'sign-in-form',
      novalidate: true,
      onsubmit: async (event: SubmitEvent) => {
        event.preventDefault();
        notices.clear();
        key.setError(undefined);
        if (!key.control.value.trim()) {
          key.setError('Paste an API key or the admin key.');
          key.control.focus();
          return;
        }
        try {
          const session = await busy(submit, () => signIn(key.control.value));
          key.control.value = '';
          signedIn(session);
        } catch (error) {
          notices.error(error);
          key.control.select();
        }
      },
    },
    key.element,
    notices.element,
    h('div', { class: 'actions' }, submit),
  );
  const element = h(
    'main',
    { class: 'sign-in' },
    h('h1', null, 'Coffer console'),
    h('p', { class: 'lede' }, 'Browse and upload files, inspect webhook deliveries, manage projects.'),
    form,
  );
  queueMicrotask(() => key.control.focus());
  return { element };
}
