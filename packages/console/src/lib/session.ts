/**
 * The signed-in key: kept in this tab's sessionStorage only (never a cookie, a URL or a log), so
 * that closing the tab or signing out forgets it.
 */
import { type Client, CofferError, createClient, type Identity } from '@coffer/client';

const STORAGE_KEY = 'coffer-console:key';

export interface Session {
  client: Client;
  identity: Identity;
}

/** The API answers on the origin that serves the console. */
const clientFor = (key: string) => createClient({ baseUrl: window.location.origin, apiKey: key });

/** Checks `key` with the API and keeps it for this tab; failures carry the API's message. */
export async function signIn(key: string): Promise<Session> {
  const trimmed = key.trim();
  const client = clientFor(trimmed);
  const identity = await client.whoami();
  if (identity.kind === 'upload_token') {
    throw new CofferError({
      status: 0,
      code: 'INVALID_INPUT',
      message: 'An upload token can only upload files: sign in with an API key or the admin key.',
    });
  }
  sessionStorage.setItem(STORAGE_KEY, trimmed);
  return { client, identity };
}

/** The session of the key this tab kept, checked again with the API; undefined when there is none. */
export async function resume(): Promise<Session | undefined> {
  const key = sessionStorage.getItem(STORAGE_KEY);
  if (!key) return undefined;
  const client = clientFor(key);
  return { client, identity: await client.whoami() };
}

export function forget(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}
