/** The deliveries of one webhook: status, attempts, response code and times; redeliver. */
import type { Delivery, DeliveryStatus } from '@coffer/client';
import { type Context, projectHash, type View } from '../../lib/context.ts';
import { h, replace } from '../../lib/dom.ts';
import { describe } from '../../lib/errors.ts';
import { when } from '../../lib/format.ts';
import { busy, button, emptyState, notice, noticeArea, select, table } from '../../lib/ui.ts';

const STATUSES = ['pending', 'delivered', 'dead', 'cancelled'] as const satisfies readonly DeliveryStatus[];
/** While a delivery is pending, the log asks again this often. */
const REFRESH_MS = 3000;

export function deliveriesLog(context: Context, projectId: string, webhookId: string): View {
  const { client } = context;
  const notices = noticeArea();
  const holder = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const filter = select([['', 'Every status'], ...STATUSES.map((s) => [s, s] as const)], '', {
    'aria-label': 'Delivery status',
  });
  filter.addEventListener('change', () => void load());
  let timer: ReturnType<typeof setTimeout> | undefined;

  function row(delivery: Delivery) {
    const again = button(
      'Redeliver',
      async () => {
        try {
          await busy(again, () => client.webhooks.redeliver(projectId, webhookId, delivery.id));
          notices.show('success', `${delivery.event} is being sent again.`);
          await load();
        } catch (error) {
          if (!context.expired(error)) notices.error(error);
        }
      },
      'small',
    );
    again.setAttribute('aria-label', `Redeliver ${delivery.event} of ${when(delivery.created_at)}`);
    again.disabled = delivery.status === 'pending';
    const response = delivery.last_response_status ?? '—';
    return h(
      'tr',
      { 'data-id': delivery.id },
      h('td', null, delivery.event),
      h('td', null, h('span', { class: `badge ${delivery.status}` }, delivery.status)),
      h('td', null, String(delivery.attempts)),
      h('td', null, String(response)),
      h('td', { class: 'value' }, delivery.last_error ?? ''),
      h('td', { title: delivery.created_at }, when(delivery.created_at)),
      h('td', { title: delivery.updated_at }, when(delivery.updated_at)),
      h('td', null, delivery.status === 'pending' ? when(delivery.next_attempt_at) : '—'),
      h('td', { class: 'row-actions' }, again),
    );
  }

  async function load() {
    clearTimeout(timer);
    try {
      const status = (filter.value || undefined) as DeliveryStatus | undefined;
      const { items } = await client.webhooks.deliveries(projectId, webhookId, status ? { status } : {});
      replace(
        holder,
        table(
          [
            'Event',
            'Status',
            'Attempts',
            'Response',
            'Last error',
            'Created',
            'Last attempt',
            'Next attempt',
            '',
          ],
          items.map(row),
          emptyState('No deliveries yet', 'They appear here when an event this webhook listens to happens.'),
        ),
      );
      if (items.some((delivery) => delivery.status === 'pending') || items.length === 0)
        timer = setTimeout(() => void load(), REFRESH_MS);
    } catch (error) {
      if (!context.expired(error)) replace(holder, notice('error', describe(error)));
    }
  }

  void load();
  const element = h(
    'section',
    { class: 'panel', 'aria-label': 'Deliveries' },
    h(
      'div',
      { class: 'panel-head' },
      h('h2', null, 'Deliveries'),
      h('span', { class: 'muted value' }, webhookId),
      filter,
      button('Refresh', () => void load(), 'small'),
      h('a', { class: 'button small quiet', href: projectHash(projectId, 'webhooks') }, 'Close'),
    ),
    notices.element,
    holder,
  );
  return { element, destroy: () => clearTimeout(timer) };
}
