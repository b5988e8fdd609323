import { describe, expect, it } from 'vitest';
import {
  acquireLock,
  askRelease,
  findUploadWithSession,
  type LockTimes,
  releaseLock,
  renewLock,
} from '../../../src/protocols/tus/upload-repo.ts';
import { backend } from '../../support/backends.ts';
import { tusEndpointSuite } from '../../support/tus-endpoint.ts';

// The lock a PATCH holds on its upload, as the database keeps it for every node: a holder that stalls
// is asked to let go (it stores what it received first), and only one past asking is taken over.
const { a, project, created } = tusEndpointSuite();
const times: LockTimes = { stall: 3, silent: 3, handover: 3 };

/** A new upload's id. */
const newUpload = async () => (await created(1024)).path.split('/').pop()!;

/** Moves `column` of the upload `seconds` into the past, as if that long went by since it was set. */
const age = (id: string, column: 'progress_at' | 'locked_at' | 'release_wanted_at', seconds: number) =>
  a.services.db.query(
    `UPDATE tus_uploads SET ${column} = ${column} - make_interval(secs => $2) WHERE id = $1`,
    [id, seconds],
  );

/** A new upload whose holder stalled, was asked to let go, and was asked too long ago. */
async function pastAsking(db: typeof a.services.db) {
  const id = await newUpload();
  await acquireLock(db, id, 'first');
  await age(id, 'progress_at', 4);
  expect(await askRelease(db, id, times)).toBe('asked');
  await renewLock(db, id, 'first', false);
  await age(id, 'release_wanted_at', 4);
  return id;
}

const nextPart = async (id: string) =>
  (await findUploadWithSession(a.services.db, project.id, id))!.upload.next_part;

describe('the lock of a tus upload', () => {
  it('is asked of a stalled holder that still renews it, never taken from it', async () => {
    const { db } = a.services;
    const id = await newUpload();
    expect(await acquireLock(db, id, 'first')).toBeDefined();
    expect(await acquireLock(db, id, 'second')).toBeUndefined();
    // Receiving bytes: nobody asks it anything.
    expect(await askRelease(db, id, times)).toBeUndefined();
    expect(await renewLock(db, id, 'first', false)).toBe('held');

    await age(id, 'progress_at', 4);
    expect(await askRelease(db, id, times)).toBe('asked');
    expect(await acquireLock(db, id, 'second')).toBeUndefined();
    // Asked until it lets go, even once it no longer looks stalled (it counts storing as progress).
    expect(await renewLock(db, id, 'first', true)).toBe('asked');
    expect(await askRelease(db, id, times)).toBe('asked');

    await releaseLock(db, id, 'first');
    expect(await askRelease(db, id, times)).toBeUndefined();
    const taken = await acquireLock(db, id, 'second');
    expect(taken?.next_part).toBe(1);
    // The next holder starts unasked.
    expect(await renewLock(db, id, 'second', false)).toBe('held');
  });

  it('is freed from a stalled holder that stopped renewing it, skipping a part number', async () => {
    const { db } = a.services;
    const id = await newUpload();
    await acquireLock(db, id, 'first');
    await age(id, 'progress_at', 4);
    await age(id, 'locked_at', 4);
    expect(await acquireLock(db, id, 'second')).toBeUndefined();
    expect(await askRelease(db, id, times)).toBe('freed');
    expect(await acquireLock(db, id, 'second')).toBeDefined();
    expect(await nextPart(id)).toBe(2);
    expect(await renewLock(db, id, 'first', false)).toBeUndefined();
  });

  it('is freed from a stalled holder asked too long ago, skipping a part number', async () => {
    const { db } = a.services;
    const id = await pastAsking(db);
    expect(await askRelease(db, id, times)).toBe('freed');
    expect(await nextPart(id)).toBe(2);
    expect(await renewLock(db, id, 'first', false)).toBeUndefined();
    expect(await askRelease(db, id, times)).toBeUndefined();
  });

  // Only PostgreSQL runs two statements at once (the embedded engine has one connection).
  it.runIf(backend === 'postgres')(
    'is not freed from a holder whose renewal with progress the freeing statement waited for',
    async () => {
      const { db } = a.services;
      const id = await pastAsking(db);
      // Past asking, the holder renews with progress (its store took bytes of its part in flight) while
      // another request asks: that request waits for the renewal, and finds the holder at work.
      const asked = await db.tx(async (q) => {
        expect(await renewLock(q, id, 'first', true)).toBe('asked');
        const [renewing] = await q.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const asking = askRelease(db, id, times);
        // The ask waits for the renewal's transaction.
        await expect
          .poll(async () => {
            const [waiting] = await db.query<{ count: number }>(
              'SELECT count(*)::int AS count FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
              [renewing!.pid],
            );
            return waiting!.count;
          })
          .toBe(1);
        return { asking };
      });
      expect(await asked.asking).toBe('asked');
      expect(await renewLock(db, id, 'first', false)).toBe('asked');
      expect(await nextPart(id)).toBe(1);
    },
  );
});
