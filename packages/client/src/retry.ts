import { abortedError, CofferError } from './errors.js';

export interface RetryOptions {
  /** Tries in all, the first included (default 4); 1 turns retries off. */
  attempts?: number;
  /** Delay before the first retry, doubled before each next one (default 250 ms). */
  baseDelayMs?: number;
  /** Ceiling of one delay (default 5000 ms). */
  maxDelayMs?: number;
}

export type RetryPolicy = Required<RetryOptions>;

export function retryPolicy(options: RetryOptions = {}): RetryPolicy {
  return {
    attempts: Math.max(1, Math.floor(options.attempts ?? 4)),
    baseDelayMs: Math.max(0, options.baseDelayMs ?? 250),
    maxDelayMs: Math.max(0, options.maxDelayMs ?? 5000),
  };
}

/** Exponential backoff with "equal jitter": half the step is fixed, half random, so clients spread out. */
export function backoffDelay(policy: RetryPolicy, retry: number): number {
  const step = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  return step / 2 + Math.random() * (step / 2);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortedError(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Network failures, 5xx and 429 (a rate limit) may pass; every other error is the caller's to see at once. */
export const isTransient = (error: unknown): boolean =>
  error instanceof CofferError &&
  (error.code === 'NETWORK_ERROR' || error.status >= 500 || error.status === 429);

/** How long to wait before try `retry + 1`: what the server asked for (Retry-After), else the backoff. */
const delayBefore = (policy: RetryPolicy, retry: number, error: unknown): number => {
  const asked = error instanceof CofferError ? error.retryAfterMs : undefined;
  // Earlier than asked would only be refused again; a little later spreads clients that were refused together.
  return asked === undefined ? backoffDelay(policy, retry) : asked + Math.random() * policy.baseDelayMs;
};

/** Runs `attempt` until it succeeds, throws a non-transient error, or the policy's tries are spent. */
export async function withRetries<T>(
  policy: RetryPolicy,
  signal: AbortSignal | undefined,
  attempt: () => Promise<T>,
): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (tries >= policy.attempts || !isTransient(error) || signal?.aborted) throw error;
      await sleep(delayBefore(policy, tries, error), signal);
    }
  }
}
