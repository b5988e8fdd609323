/**
 * The JSON API caller: typed by the OpenAPI paths, with bearer auth, one token refresh on
 * TOKEN_EXPIRED, and retries of network failures and 5xx.
 */
import { abortedError, CofferError, errorFromAnswer, invalidInput, networkError } from './errors.js';
import type { BodyOf, MethodOf, ParamsOf, Path, QueryOf, ResponseOf } from './openapi.js';
import { type RetryPolicy, withRetries } from './retry.js';

export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export interface RequestOptions {
  signal?: AbortSignal | undefined;
}

export interface CallInit<P extends Path, M extends MethodOf<P>> extends RequestOptions {
  params?: ParamsOf<P, M>;
  query?: QueryOf<P, M>;
  body?: BodyOf<P, M>;
}

export interface ApiOptions {
  baseUrl: string;
  fetch: Fetch;
  retry: RetryPolicy;
  headers?: Record<string, string> | undefined;
  token?: string | undefined;
  refreshToken?: (() => string | Promise<string>) | undefined;
}

export interface Api {
  call<P extends Path, M extends MethodOf<P>>(
    method: M,
    path: P,
    init?: CallInit<P, M>,
  ): Promise<ResponseOf<P, M>>;
  /** The bearer credential sent from now on. */
  setToken(token: string | undefined): void;
  readonly retry: RetryPolicy;
}

type Values = Record<string, unknown>;

function urlOf(baseUrl: string, path: string, params: Values = {}, query: Values = {}): string {
  const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (typeof value !== 'string' || value === '') throw invalidInput(`${name} must be a non-empty string`);
    return encodeURIComponent(value);
  });
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item === undefined || item === null) continue;
      search.append(name, typeof item === 'object' ? JSON.stringify(item) : String(item));
    }
  }
  const text = search.toString();
  return `${baseUrl}${filled}${text ? `?${text}` : ''}`;
}

export function createApi(options: ApiOptions): Api {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  let token = options.token;
  let refreshing: Promise<string> | undefined;

  const refresh = async (): Promise<string> => {
    try {
      return await options.refreshToken!();
    } catch (cause) {
      if (cause instanceof CofferError) throw cause;
      throw new CofferError({
        status: 0,
        code: 'TOKEN_REFRESH_FAILED',
        message: `refreshToken failed${cause instanceof Error ? `: ${cause.message}` : ''}`,
        cause,
      });
    }
  };
  /** A new token, unless another request already replaced `stale`; concurrent callers share one refresh. */
  const refreshed = async (stale: string | undefined): Promise<void> => {
    if (token !== stale) return;
    refreshing ??= refresh();
    const pending = refreshing;
    try {
      token = await pending;
    } finally {
      if (refreshing === pending) refreshing = undefined;
    }
  };

  async function send(url: string, method: string, body: string | undefined, signal?: AbortSignal) {
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const sent = token;
    if (sent) headers.authorization = `Bearer ${sent}`;
    try {
      const response = await options.fetch(url, { method, headers, body, signal });
      return { response, text: await response.text(), sent };
    } catch (error) {
      if (signal?.aborted) throw abortedError(signal);
      throw error instanceof CofferError ? error : networkError(error);
    }
  }

  return {
    retry: options.retry,
    setToken(value) {
      token = value;
    },
    async call(method, path, init = {}) {
      const url = urlOf(baseUrl, path, init.params as Values, init.query as Values);
      const body = init.body === undefined ? undefined : JSON.stringify(init.body);
      let refreshUsed = false;
      return withRetries(options.retry, init.signal, async () => {
        for (;;) {
          const { response, text, sent } = await send(url, method.toUpperCase(), body, init.signal);
          if (response.ok) {
            if (!text) return undefined as never;
            try {
              return JSON.parse(text);
            } catch (cause) {
              throw new CofferError({
                status: response.status,
                code: 'INVALID_RESPONSE',
                message: 'The answer is not JSON',
                cause,
              });
            }
          }
          const error = errorFromAnswer(
            response.status,
            text,
            response.headers.get('x-request-id'),
            response.headers.get('retry-after'),
          );
          if (error.code === 'TOKEN_EXPIRED' && options.refreshToken && !refreshUsed) {
            refreshUsed = true;
            await refreshed(sent);
            continue;
          }
          throw error;
        }
      });
    },
  };
}
