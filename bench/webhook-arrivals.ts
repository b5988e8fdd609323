/** What the webhook receiver counted: rates between its arrivals, and waits for a count of them. */
import { setTimeout as sleep } from 'node:timers/promises';
import type { WebhookReceiver } from './helper-servers.ts';
import type { ReceiverStats } from './webhook-receiver.ts';

export const now = () => performance.timeOrigin + performance.now();

/** Requests per second between the first and the last arrival (n requests: n − 1 intervals). */
export function spanRate(stats: Pick<ReceiverStats, 'count' | 'first' | 'last'>): number {
  return stats.count > 1 ? ((stats.count - 1) * 1000) / (stats.last - stats.first) : Number.NaN;
}

/** The rate between the arrivals at the 10th and the 90th percentile: without ramp-up and tail. */
export function steadyRate(arrivals: number[]): number {
  if (arrivals.length < 20) return Number.NaN;
  const low = Math.floor(arrivals.length * 0.1);
  const high = Math.floor(arrivals.length * 0.9);
  return ((high - low) * 1000) / (arrivals[high]! - arrivals[low]!);
}

/** Waits until the receiver counted `count` requests; fails when nothing arrives for `stallMs`. */
export async function waitForCount(
  receiver: WebhookReceiver,
  count: number,
  stallMs: number,
  diagnose: () => Promise<string>,
  /** Called once, when the first delivery is seen (within one poll of it). */
  onFirst?: () => void,
): Promise<ReceiverStats> {
  let last = -1;
  let progressAt = Date.now();
  for (;;) {
    const stats = await receiver.stats();
    if (last <= 0 && stats.count > 0) onFirst?.();
    if (stats.count >= count) return receiver.stats(true);
    if (stats.count !== last) {
      last = stats.count;
      progressAt = Date.now();
    } else if (Date.now() - progressAt > stallMs) {
      throw new Error(
        `the receiver got ${stats.count} of ${count} deliveries, none for ${stallMs / 1000} s: ${await diagnose()}`,
      );
    }
    await sleep(20);
  }
}
