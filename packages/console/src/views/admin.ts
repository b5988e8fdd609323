/**
 * The admin key's view: organizations, the projects of the one chosen, and the API keys of the
 * project chosen; each can be created here (a new key is shown once, with a copy button).
 */
import type { ApiKey, Organization, Project, Scope } from '@coffer/client';
import { type Context, projectHash, type Route, type View } from '../lib/context.ts';
import { h, replace } from '../lib/dom.ts';
import { describe, fieldOf } from '../lib/errors.ts';
import { when } from '../lib/format.ts';
import {
  busy,
  button,
  confirmDialog,
  emptyState,
  field,
  input,
  notice,
  noticeArea,
  secretBox,
  section,
  table,
} from '../lib/ui.ts';

/** Checked when a key is created; other scopes the server has (say, audit:read) are offered unchecked. */
const CHECKED = [
  'files:read',
  'files:upload',
  'files:download',
  'files:update_metadata',
  'files:delete',
  'upload_tokens:create',
  'projects:read',
  'projects:update',
] as const satisfies readonly Scope[];

const adminHash = (organizationId?: string, projectId?: string) =>
  ['#/admin', organizationId, projectId]
    .filter(Boolean)
    .map((part, index) => (index ? encodeURIComponent(part!) : part))
    .join('/');

/** A one-field form (a name) that creates something and shows what the API said. */
function nameForm(label: string, action: string, create: (name: string) => Promise<void>) {
  const name = field(label, input({ autocomplete: 'off', required: true, maxLength: 200 }));
  const submit = h('button', { type: 'submit', class: 'button primary' }, action);
  return h(
    'form',
    {
      novalidate: true,
      class: 'inline-form',
      onsubmit: async (event: SubmitEvent) => {
        event.preventDefault();
        name.setError(undefined);
        const value = name.control.value.trim();
        if (!value) return name.setError('A name is needed.');
        try {
          await busy(submit, () => create(value));
          name.control.value = '';
        } catch (error) {
          name.setError(describe(error));
        }
      },
    },
    name.element,
    submit,
  );
}

export function adminView(context: Context, route: Route): View {
  const { client } = context;
  const notices = noticeArea();
  const organizations = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const projects = h('div');
  const keys = h('div');
  let current = route;

  const fail = (into: HTMLElement) => (error: unknown) => {
    if (!context.expired(error)) replace(into, notice('error', describe(error)));
  };

  async function loadOrganizations() {
    try {
      const { items } = await client.organizations.list();
      const row = (organization: Organization) =>
        h(
          'tr',
          { class: organization.id === current.organizationId ? 'selected' : null },
          h('td', null, h('a', { href: adminHash(organization.id) }, organization.name)),
          h('td', { class: 'value' }, organization.id),
          h('td', null, when(organization.created_at)),
        );
      replace(
        organizations,
        table(
          ['Name', 'ID', 'Created'],
          items.map(row),
          emptyState('No organizations yet', 'Create the first one below.'),
        ),
        nameForm('New organization', 'Create organization', async (name) => {
          const created = await client.organizations.create({ name });
          context.navigate(adminHash(created.id));
        }),
      );
    } catch (error) {
      fail(organizations)(error);
    }
  }

  async function loadProjects(organizationId: string) {
    replace(projects, h('p', { class: 'muted' }, 'Loading…'));
    try {
      const { items } = await client.projects.list(organizationId);
      const row = (project: Project) =>
        h(
          'tr',
          { class: project.id === current.id ? 'selected' : null },
          h('td', null, h('a', { href: adminHash(organizationId, project.id) }, project.name)),
          h('td', { class: 'value' }, project.id),
          h('td', null, when(project.created_at)),
          h(
            'td',
            { class: 'row-actions' },
            h('a', { class: 'button small', href: projectHash(project.id, 'files') }, 'Open files'),
          ),
        );
      replace(
        projects,
        section(
          'Projects',
          table(
            ['Name', 'ID', 'Created', ''],
            items.map(row),
            emptyState('No projects in this organization', 'Create one below.'),
          ),
          nameForm('New project', 'Create project', async (name) => {
            const created = await client.projects.create(organizationId, { name });
            context.navigate(adminHash(organizationId, created.id));
          }),
        ),
      );
    } catch (error) {
      fail(projects)(error);
    }
  }

  function keyForm(projectId: string, shown: HTMLElement) {
    const name = field(
      'Name',
      input({ autocomplete: 'off', required: true, maxLength: 200, placeholder: 'backend' }),
    );
    // The admin key holds every scope the server knows: those are the ones offered.
    const scopes = context.identity.scopes as Scope[];
    const boxes = scopes.map((scope) => {
      const box = input({
        type: 'checkbox',
        value: scope,
        checked: (CHECKED as readonly string[]).includes(scope),
      });
      return { scope, box, label: h('label', { class: 'check' }, box, ' ', scope) };
    });
    const scopesError = h('p', { class: 'field-error', hidden: true, role: 'alert' });
    const submit = h('button', { type: 'submit', class: 'button primary' }, 'Create API key');
    return h(
      'form',
      {
        novalidate: true,
        onsubmit: async (event: SubmitEvent) => {
          event.preventDefault();
          name.setError(undefined);
          scopesError.hidden = true;
          shown.replaceChildren();
          const chosen = boxes.filter(({ box }) => box.checked).map(({ scope }) => scope);
          if (!name.control.value.trim()) return name.setError('A name is needed.');
          if (!chosen.length) {
            scopesError.textContent = 'Choose at least one scope.';
            scopesError.hidden = false;
            return;
          }
          try {
            const key = await busy(submit, () =>
              client.apiKeys.create(projectId, { name: name.control.value.trim(), scopes: chosen }),
            );
            name.control.value = '';
            await loadKeys(projectId);
            replace(
              keys.querySelector('.new-key')!,
              secretBox(
                'New API key',
                key.key,
                'Copy it now: it is shown only this once (only its hash is kept).',
              ),
            );
          } catch (error) {
            if (context.expired(error)) return;
            if (fieldOf(error) === 'name') name.setError(describe(error));
            else {
              scopesError.textContent = describe(error);
              scopesError.hidden = false;
            }
          }
        },
      },
      h('div', { class: 'form-grid' }, name.element),
      h(
        'fieldset',
        { class: 'field' },
        h('legend', null, 'Scopes'),
        ...boxes.map(({ label }) => label),
        scopesError,
      ),
      h('div', { class: 'actions' }, submit),
    );
  }

  async function loadKeys(projectId: string) {
    try {
      const { items } = await client.apiKeys.list(projectId);
      const row = (key: ApiKey) => {
        const revoke = button(
          'Revoke',
          async () => {
            const sure = await confirmDialog({
              title: `Revoke ${key.name}?`,
              body: `Requests with ${key.key_prefix}… are refused at once. This cannot be undone.`,
              confirm: 'Revoke',
              danger: true,
            });
            if (!sure) return;
            try {
              await busy(revoke, () => client.apiKeys.revoke(projectId, key.id));
              await loadKeys(projectId);
            } catch (error) {
              if (!context.expired(error)) notices.error(error);
            }
          },
          'danger small',
        );
        return h(
          'tr',
          null,
          h('td', null, key.name),
          h('td', { class: 'value' }, `${key.key_prefix}…`),
          h('td', null, key.scopes.join(', ')),
          h('td', null, when(key.created_at)),
          h('td', null, key.revoked_at ? `Revoked ${when(key.revoked_at)}` : revoke),
        );
      };
      const shown = h('div', { class: 'new-key' });
      replace(
        keys,
        section(
          'API keys',
          table(
            ['Name', 'Key', 'Scopes', 'Created', ''],
            items.map(row),
            emptyState('No API keys for this project', 'Create one below; it is shown once.'),
          ),
          shown,
          keyForm(projectId, shown),
        ),
      );
    } catch (error) {
      fail(keys)(error);
    }
  }

  function show(next: Route) {
    current = next;
    notices.clear();
    void loadOrganizations();
    if (next.organizationId) void loadProjects(next.organizationId);
    else projects.replaceChildren();
    if (next.organizationId && next.id) void loadKeys(next.id);
    else keys.replaceChildren();
  }

  const element = h(
    'div',
    { class: 'page' },
    h('h1', null, 'Administration'),
    notices.element,
    section('Organizations', organizations),
    projects,
    keys,
  );
  show(route);
  return {
    element,
    update(next) {
      show(next);
      return true;
    },
  };
}
