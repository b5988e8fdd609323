/** When a failed job is tried again, and for how long. */
export interface RetryPolicy {
  /** Delay before the next attempt after attempt `attempt` (1 for the first) failed. */
  backoffSeconds(attempt: number): number;
  /**
   * How long a job may keep failing, from its first failure, before its handler gives it up;
   * Infinity: retried for as long as it fails (a handler without giveUp always is).
   */
  windowSeconds: number;
}

/** Doubles from `firstSeconds` after each failed attempt, up to `maxSeconds`. */
export function exponentialBackoff(firstSeconds: number, maxSeconds: number): (attempt: number) => number {
  return (attempt) => Math.min(firstSeconds * 2 ** Math.max(attempt - 1, 0), maxSeconds);
}

/** Retried for as long as the job fails: 5 s, 10 s, 20 s … then every 10 minutes. */
export const RETRY_FOREVER: RetryPolicy = {
  backoffSeconds: exponentialBackoff(5, 600),
  windowSeconds: Infinity,
};

/**
 * Seconds until the next attempt of a job that failed attempt `attempt` after failing for
 * `failingSeconds` in all (0 at its first failure), or undefined once its window is over. The last
 * delay is cut short so that one attempt falls at the very end of the window.
 */
export function nextRetryDelay(
  policy: RetryPolicy,
  attempt: number,
  failingSeconds: number,
): number | undefined {
  const left = policy.windowSeconds - failingSeconds;
  if (!(left > 0)) return undefined;
  return Math.min(policy.backoffSeconds(attempt), left);
}
