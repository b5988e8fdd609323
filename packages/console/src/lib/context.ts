/** What every view gets: the signed-in client, what its key is, and the way around the console. */
import type { Client, Identity } from '@coffer/client';

export type RouteName = 'home' | 'sign-in' | 'admin' | 'files' | 'webhooks' | 'settings';

export interface Route {
  name: RouteName;
  /** The project of files, webhooks and settings; the organization of admin. */
  projectId?: string | undefined;
  organizationId?: string | undefined;
  /** A file (files), a webhook (webhooks), a project (admin). */
  id?: string | undefined;
}

export interface Context {
  client: Client;
  identity: Identity;
  navigate(hash: string): void;
  /**
   * When `error` says the key stopped working (revoked, unknown), signs out with its message and
   * answers true; the view then stops what it was doing.
   */
  expired(error: unknown): boolean;
}

export interface View {
  element: HTMLElement;
  /** Takes a new route of the same view and project in place (a file opened); false: mount anew. */
  update?(route: Route): boolean;
  destroy?(): void;
}

const segment = (value: string | undefined) => (value ? decodeURIComponent(value) : undefined);

/** `#/p/proj_1/files/file_2`, `#/admin/org_1/proj_2`, `#/sign-in` … */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('?')[0]!.split('/');
  const [first, second, third, fourth] = parts;
  if (first === 'sign-in') return { name: 'sign-in' };
  if (first === 'admin') return { name: 'admin', organizationId: segment(second), id: segment(third) };
  if (first === 'p' && second && (third === 'files' || third === 'webhooks' || third === 'settings')) {
    return { name: third, projectId: segment(second), id: segment(fourth) };
  }
  return { name: 'home' };
}

export const projectHash = (projectId: string, section: 'files' | 'webhooks' | 'settings', id?: string) =>
  `#/p/${encodeURIComponent(projectId)}/${section}${id ? `/${encodeURIComponent(id)}` : ''}`;
