import { describe, expect, it } from 'vitest';
import { claim } from '../../src/infra/jobs/index.ts';
import {
  type ClaimedDelivery,
  type DeliveryStatus,
  deliveriesQueue,
  recordAttempts,
} from '../../src/modules/webhooks/delivery-repo.ts';
import { initiate } from '../support/files.ts';
import { sleep } from '../support/processes.ts';
import { deliveriesOf, register, webhooksSuite } from '../support/webhooks.ts';

// Webhook deliveries claimed and their outcomes recorded in batches: a backlog sent each delivery once,
// each delivery of a batch its own outcome, nothing written for an attempt whose lease lapsed.
const { coffer, receiver, newProject, ownDispatcher, runFor } = webhooksSuite();

describe('claims and outcomes in batches', () => {
  it('sends a backlog due at once, each delivery once, many claimed and recorded per statement', async () => {
    const project = await newProject();
    // Slow answers keep slots busy, so that claims meet a runner with few of them free.
    const endpoints = [0, 1, 2].map(() => receiver.endpoint({ fallback: { status: 200, delayMs: 100 } }));
    const hooks: { id: string }[] = [];
    for (const endpoint of endpoints) hooks.push(await register(project, endpoint, ['file.uploaded']));
    for (let i = 0; i < 40; i++) await initiate(project, { filename: `backlog${i}.txt` });
    // The dispatcher's statements, counted: 120 deliveries, 32 held at once (16 requests in flight).
    const claims: number[] = [];
    let outcomes = 0;
    const db = coffer.services.db;
    const counted = {
      ...db,
      async query<T>(sql: string, params?: unknown[]) {
        const rows = await db.query<T>(sql, params);
        if (sql.includes('SKIP LOCKED')) claims.push(rows.length);
        else if (sql.startsWith('UPDATE deliveries d SET status')) outcomes++;
        return rows;
      },
    };
    const dispatcher = ownDispatcher({ concurrency: 16 }, counted);
    try {
      const delivered = async () =>
        (await project.call('GET', `/webhooks/${hooks[2]!.id}/deliveries?status=delivered`)).body.total ===
        40;
      // Claims run while deliveries are in flight, not only once the runner is idle.
      const deadline = Date.now() + 10_000;
      while (!(endpoints.every((e) => e.requests.length >= 40) && (await delivered()))) {
        if (Date.now() > deadline) throw new Error('the backlog was not delivered within 10 s');
        if ((await dispatcher.runOnce()) === 0) await sleep(20);
      }
      await dispatcher.settle();
      await runFor(200, dispatcher);
    } finally {
      await dispatcher.close();
    }
    for (const [i, endpoint] of endpoints.entries()) {
      expect(endpoint.requests).toHaveLength(40);
      const ids = new Set(endpoint.requests.map((r) => r.headers['x-coffer-delivery-id']));
      expect(ids.size).toBe(40);
      for (const request of endpoint.requests) {
        expect(request.signatureValid).toBe(true);
        expect(request.headers['x-coffer-delivery-attempt']).toBe('1');
      }
      const log = await deliveriesOf(project, hooks[i]!.id);
      expect(log.map((d) => [d.status, d.attempts])).toEqual(Array(40).fill(['delivered', 1]));
    }
    // The first claim fills all 32 slots; later ones wait for at least a quarter of them to free
    // (the last takes what is left).
    const taken = claims.filter((n) => n > 0);
    expect(taken[0]).toBe(32);
    expect(taken.length).toBeGreaterThan(2);
    for (const n of taken.slice(1, -1)) expect(n).toBeGreaterThanOrEqual(8);
    expect(outcomes).toBeLessThan(120);
  });
});

describe('outcomes recorded in batches', () => {
  it('records each delivery of a batch its own outcome: delivered, retried with its error, on schedule', async () => {
    const project = await newProject();
    const ok = receiver.endpoint({ fallback: { status: 200 } });
    const broken = receiver.endpoint({ fallback: { status: 500, body: 'broken' } });
    const gone = receiver.endpoint({ fallback: { status: 410, body: 'gone' } });
    const accepted = receiver.endpoint({ fallback: { status: 202 } });
    const hooks = [
      { hook: await register(project, ok, ['file.uploaded']), status: 'delivered', code: 200, error: null },
      {
        hook: await register(project, broken, ['file.uploaded']),
        status: 'pending',
        code: 500,
        error: 'HTTP 500: broken',
      },
      {
        hook: await register(project, gone, ['file.uploaded']),
        status: 'pending',
        code: 410,
        error: 'HTTP 410: gone',
      },
      {
        hook: await register(project, accepted, ['file.uploaded']),
        status: 'delivered',
        code: 202,
        error: null,
      },
    ];
    // 6 events × 4 webhooks: 24 attempts claimed at once, finishing together, their outcomes mixed.
    for (let i = 0; i < 6; i++) await initiate(project, { filename: `b${i}.txt` });
    // A dispatcher of its own, with a deadline no endpoint here comes near.
    const dispatcher = ownDispatcher();
    try {
      expect(await dispatcher.runOnce()).toBe(24);
      await dispatcher.settle();
    } finally {
      await dispatcher.close();
    }
    for (const { hook, status, code, error } of hooks) {
      const log = await deliveriesOf(project, hook.id);
      expect(log).toHaveLength(6);
      for (const delivery of log) {
        expect(delivery).toMatchObject({
          status,
          attempts: 1,
          last_response_status: code,
          last_error: error,
        });
        if (status === 'pending') {
          // Attempt 2 is due the schedule's 0.2 s after this attempt was recorded.
          expect(new Date(delivery.next_attempt_at).getTime() - new Date(delivery.updated_at).getTime()).toBe(
            200,
          );
        } else expect(delivery.next_attempt_at).toBeNull();
      }
    }
    for (const endpoint of [ok, broken, gone, accepted]) expect(endpoint.requests).toHaveLength(6);
  });

  it('writes nothing for an attempt whose lease lapsed and was claimed again; the new holder records its own', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint();
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    await initiate(project);
    const { db } = coffer.services;
    const queue = deliveriesQueue({ firstDelaySeconds: 0, maxAttempts: 5 });
    const claimAll = async () =>
      (await claim(db, queue, { kinds: ['deliver'], limit: 100, leaseSeconds: 30 })).filter(
        (delivery) => delivery.url === endpoint.url,
      );
    const first = await claimAll();
    expect(first).toHaveLength(2);
    // The first worker stopped between claim and record: once its lease runs out, both are due again.
    expect(await claimAll()).toEqual([]);
    await db.query(
      "UPDATE deliveries SET next_attempt_at = now() - interval '1 second' WHERE webhook_id = $1",
      [hook.id],
    );
    const second = await claimAll();
    expect(second.map((d) => [d.id, d.attempts]).sort()).toEqual(first.map((d) => [d.id, 2]).sort());

    const outcome = (lease: ClaimedDelivery, status: DeliveryStatus, code: number) => ({
      lease,
      status,
      delaySeconds: 0,
      responseStatus: code,
      error: null,
    });
    // One batch with the lapsed attempts (they would mark the deliveries dead) and one current one.
    const recorded = await recordAttempts(db, [
      outcome(first[0]!, 'dead', 500),
      outcome(first[1]!, 'dead', 500),
      outcome(second[1]!, 'delivered', 200),
    ]);
    expect([...recorded]).toEqual([[second[1]!.id, 'delivered']]);
    const log = new Map((await deliveriesOf(project, hook.id)).map((d) => [d.id, d]));
    expect(log.get(second[0]!.id)).toMatchObject({
      status: 'pending',
      attempts: 2,
      last_response_status: null,
    });
    expect(log.get(second[1]!.id)).toMatchObject({
      status: 'delivered',
      attempts: 2,
      last_response_status: 200,
    });
    // Recorded once: the same outcome again (its lease is spent) writes nothing more.
    expect((await recordAttempts(db, [outcome(second[1]!, 'dead', 500)])).size).toBe(0);
    expect((await recordAttempts(db, [outcome(second[0]!, 'delivered', 204)])).size).toBe(1);
    expect((await deliveriesOf(project, hook.id)).map((d) => d.status)).toEqual(['delivered', 'delivered']);
    expect(endpoint.requests).toHaveLength(0);
  });
});
