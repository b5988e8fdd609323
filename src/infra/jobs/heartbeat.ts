import type { Logger } from 'pino';
import type { Db } from '../db.ts';
import { type Claimed, type Lease, LeaseLostError, type QueueTable, renew } from './queue.ts';

interface Held {
  lease: Lease;
  controller: AbortController;
  /** When the last renewal that reached the database was sent (ms, this process's clock). */
  renewedAt: number;
}

/**
 * Keeps the leases of the jobs this worker runs: renews them all in one statement every third of a
 * lease, so a job may run for as long as it needs while a dead worker's jobs come back within one
 * lease. A job whose lease could not be renewed (another worker took it over, it is gone, or the
 * database stayed unreachable until the lease ran out) has its signal aborted: its handler stops
 * and writes nothing.
 */
export function createHeartbeat(deps: {
  db: Db;
  queue: QueueTable<Claimed>;
  leaseSeconds: number;
  logger: Logger;
}) {
  const { db, queue, leaseSeconds, logger } = deps;
  const leaseMs = leaseSeconds * 1000;
  const held = new Map<string, Held>();
  let timer: NodeJS.Timeout | undefined;
  let beating = false;

  function lose(entry: Held, why: string): void {
    if (held.get(entry.lease.id) !== entry) return;
    held.delete(entry.lease.id);
    logger.warn({ queue: queue.name, job_id: entry.lease.id, reason: why }, 'job lease lost; the job stops');
    entry.controller.abort(new LeaseLostError(`${queue.name} ${entry.lease.id}: ${why}`));
  }

  async function beat(): Promise<void> {
    if (beating || held.size === 0) return;
    beating = true;
    const entries = [...held.values()];
    const sentAt = Date.now();
    try {
      const renewed = await renew(
        db,
        queue,
        entries.map((entry) => entry.lease),
        leaseSeconds,
      );
      for (const entry of entries) {
        if (renewed.has(entry.lease.id)) entry.renewedAt = sentAt;
        else lose(entry, 'taken over by another worker, or gone');
      }
    } catch (error) {
      logger.warn({ err: error, queue: queue.name, jobs: entries.length }, 'job leases not renewed');
      for (const entry of entries) {
        if (Date.now() - entry.renewedAt >= leaseMs) lose(entry, 'not renewed before it ran out');
      }
    } finally {
      beating = false;
    }
  }

  function update(): void {
    if (held.size > 0 && !timer) {
      timer = setInterval(() => void beat(), leaseMs / 3);
      timer.unref();
    } else if (held.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  return {
    /** Starts renewing the lease of a job just claimed; `signal` aborts when it is lost. Call `drop` when the handler is done. */
    hold(lease: Lease, claimedAt: number): { signal: AbortSignal; drop(): void } {
      const entry: Held = { lease, controller: new AbortController(), renewedAt: claimedAt };
      held.set(lease.id, entry);
      update();
      return {
        signal: entry.controller.signal,
        drop() {
          if (held.get(lease.id) === entry) held.delete(lease.id);
          update();
        },
      };
    },
  };
}

export type Heartbeat = ReturnType<typeof createHeartbeat>;
