/**
 * Coffer's web console: sign-in, then the views of a project (files, webhooks, settings) and, with
 * the admin key, organizations, projects and API keys. Every call goes through @coffer/client.
 */
import { type Context, parseRoute, projectHash, type Route, type View } from './lib/context.ts';
import { h, replace } from './lib/dom.ts';
import { describe, isUnauthenticated } from './lib/errors.ts';
import { forget, resume, type Session } from './lib/session.ts';
import { button, notice } from './lib/ui.ts';
import { adminView } from './views/admin.ts';
import { filesView } from './views/files.ts';
import { settingsView } from './views/settings.ts';
import { signInView } from './views/sign-in.ts';
import { webhooksView } from './views/webhooks.ts';

const root = document.getElementById('app')!;
let session: Session | undefined;
let mounted: { key: string; view: View } | undefined;
/** Why the last session ended, shown on the sign-in page. */
let signedOutBecause: string | undefined;

function unmount() {
  mounted?.view.destroy?.();
  mounted = undefined;
}

function signOut(reason?: string) {
  forget();
  session = undefined;
  signedOutBecause = reason;
  unmount();
  if (window.location.hash === '#/sign-in') render();
  else window.location.hash = '#/sign-in';
}

function contextOf(current: Session): Context {
  return {
    ...current,
    navigate(hash) {
      if (window.location.hash === hash) render();
      else window.location.hash = hash;
    },
    expired(error) {
      if (!isUnauthenticated(error)) return false;
      signOut(`You were signed out: ${describe(error)}`);
      return true;
    },
  };
}

const homeOf = ({ identity }: Session) =>
  identity.kind === 'admin' ? '#/admin' : projectHash(identity.project_id ?? '', 'files');

/** The header of a signed-in page: where one is, where one can go, and signing out. */
function shell(context: Context, route: Route, content: HTMLElement): HTMLElement {
  const { identity } = context;
  const link = (href: string, label: string, active: boolean) =>
    h(
      'a',
      { href, class: active ? 'nav-link active' : 'nav-link', 'aria-current': active ? 'page' : null },
      label,
    );
  const nav = h('nav', { class: 'nav', 'aria-label': 'Sections' });
  if (identity.kind === 'admin') nav.append(link('#/admin', 'Organizations', route.name === 'admin'));
  const projectId = route.projectId;
  const projectName = h('span', { class: 'project-name' });
  if (projectId && route.name !== 'admin') {
    projectName.textContent = projectId;
    nav.append(
      link(projectHash(projectId, 'files'), 'Files', route.name === 'files'),
      link(projectHash(projectId, 'webhooks'), 'Webhooks', route.name === 'webhooks'),
      link(projectHash(projectId, 'settings'), 'Settings', route.name === 'settings'),
    );
    if (identity.scopes.includes('projects:read')) {
      context.client.projects.get(projectId).then(
        (project) => {
          projectName.textContent = project.name;
          projectName.title = project.id;
        },
        () => undefined, // the id stays; the view itself reports what fails
      );
    }
  }
  const who = identity.kind === 'admin' ? 'Admin key' : `API key · ${identity.scopes.length} scopes`;
  return h(
    'div',
    { class: 'shell' },
    h(
      'header',
      { class: 'top' },
      h('a', { class: 'brand', href: '#/' }, 'Coffer'),
      projectName,
      nav,
      h('span', { class: 'who', title: identity.scopes.join(', ') }, who),
      button('Sign out', () => signOut(), 'quiet', { id: 'sign-out' }),
    ),
    h('main', { class: 'content', id: 'main' }, content),
  );
}

function viewFor(context: Context, route: Route): View {
  switch (route.name) {
    case 'admin':
      return adminView(context, route);
    case 'webhooks':
      return webhooksView(context, route);
    case 'settings':
      return settingsView(context, route);
    default:
      return filesView(context, route);
  }
}

function render(): void {
  const route = parseRoute(window.location.hash);
  if (!session) {
    if (route.name !== 'sign-in') {
      window.location.hash = '#/sign-in';
      return;
    }
    unmount();
    const view = signInView(signedOutBecause, (started) => {
      session = started;
      signedOutBecause = undefined;
      window.location.hash = homeOf(started);
    });
    mounted = { key: 'sign-in', view };
    replace(root, view.element);
    return;
  }
  const { identity } = session;
  const ownsProject = identity.kind === 'admin' || route.projectId === identity.project_id;
  if (
    route.name === 'home' ||
    route.name === 'sign-in' ||
    (route.name === 'admin' && identity.kind !== 'admin') ||
    (route.projectId !== undefined && route.name !== 'admin' && !ownsProject)
  ) {
    window.location.hash = homeOf(session);
    return;
  }
  const key = `${route.name}:${route.projectId ?? route.organizationId ?? ''}`;
  if (mounted?.key === key && mounted.view.update?.(route)) return;
  unmount();
  const context = contextOf(session);
  const view = viewFor(context, route);
  mounted = { key, view };
  replace(root, shell(context, route, view.element));
}

async function start(): Promise<void> {
  try {
    session = await resume();
  } catch (error) {
    if (isUnauthenticated(error)) {
      forget();
      signedOutBecause = `You were signed out: ${describe(error)}`;
    } else {
      replace(
        root,
        h(
          'main',
          { class: 'sign-in' },
          h('h1', null, 'Coffer console'),
          notice('error', describe(error)),
          button('Try again', () => void start(), 'primary'),
        ),
      );
      return;
    }
  }
  render();
}

window.addEventListener('hashchange', render);
void start();
