import { describe, expect, it } from 'vitest';
import { createDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { secondDb } from '../support/backends.ts';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';
import { initiate, put } from '../support/files.ts';
import { sleep } from '../support/processes.ts';
import { deliveriesOf, ENV, quiet, register, webhooksSuite } from '../support/webhooks.ts';

// Webhook deliveries through restarts, lapsed leases and several dispatchers: every attempt sent once,
// a hanging endpoint holding back no other.
const { coffer, receiver, newProject, ownDispatcher, pump, runFor } = webhooksSuite();

describe('durability and concurrency', () => {
  it('goes on after a restart from the attempt where it was', async () => {
    // The second attempt due 3 s after the first: the first server stops well before it, even on a busy
    // machine, so that the second server is the one to send it.
    const env = { ...ENV, COFFER_WEBHOOK_RETRY_SCHEDULE: '0,3,0.2,0.2,0.2' };
    const first = await startCoffer(env, { workers: true, webhookCa: receiver.ca });
    let second: TestCoffer | undefined;
    try {
      const project = await newProject(undefined, first);
      const endpoint = receiver.endpoint({ script: [{ status: 500 }], fallback: { status: 200 } });
      const hook = await register(project, endpoint, ['file.uploaded']);
      await initiate(project);
      await endpoint.waitFor(1);
      const log = () =>
        (second ?? first).call('GET', `/v1/projects/${project.id}/webhooks/${hook.id}/deliveries`, {
          token: project.key,
        });
      const deadline = Date.now() + 5000;
      while (
        (await log()).body.items[0].attempts !== 1 ||
        (await log()).body.items[0].last_response_status !== 500
      ) {
        if (Date.now() > deadline) throw new Error('attempt 1 was not recorded');
        await sleep(20);
      }
      const pending = (await log()).body.items[0];
      expect(pending.status).toBe('pending');
      expect(new Date(pending.next_attempt_at).getTime()).toBeGreaterThan(Date.now());
      await first.close();

      second = await startCoffer(env, { workers: true, webhookCa: receiver.ca });
      await endpoint.waitFor(2);
      const [one, two] = endpoint.requests;
      expect(two!.headers['x-coffer-delivery-attempt']).toBe('2');
      expect(two!.headers['x-coffer-event-id']).toBe(one!.headers['x-coffer-event-id']);
      expect(two!.signatureValid).toBe(true);
      expect(two!.at - one!.at).toBeGreaterThanOrEqual(2995);
      const deadline2 = Date.now() + 5000;
      while ((await log()).body.items[0].status !== 'delivered') {
        if (Date.now() > deadline2) throw new Error('attempt 2 was not recorded');
        await sleep(20);
      }
      expect((await log()).body.items[0]).toMatchObject({
        status: 'delivered',
        attempts: 2,
        last_response_status: 200,
      });
      await sleep(300);
      expect(endpoint.requests).toHaveLength(2);
    } finally {
      await first.close().catch(() => {});
      await second?.close();
    }
  });

  it('never sends a sixth attempt when the worker of the fifth stopped before recording it', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 200 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    // As a worker leaves it when it dies during attempt 5: claimed (counted), its lease run out.
    await coffer.services.db.query(
      "UPDATE deliveries SET attempts = 5, next_attempt_at = now() - interval '1 second' WHERE webhook_id = $1",
      [hook.id],
    );
    expect(await coffer.services.dispatcher.runOnce()).toBe(0);
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({ status: 'dead', attempts: 5 });
    await runFor(300);
    expect(endpoint.requests).toHaveLength(0);
  });

  it('never sends the same attempt twice from two dispatchers', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({
      script: Array.from({ length: 8 }, () => ({ status: 500, delayMs: 30 })),
      fallback: { status: 200, delayMs: 30 },
    });
    const hook = await register(project, endpoint, ['file.uploaded']);
    for (let i = 0; i < 12; i++) await initiate(project, { filename: `f${i}.txt` });
    const other = await secondDb();
    const options = {
      retrySchedule: [0, 0.05, 0.05, 0.05, 0.05],
      timeoutMs: 2000,
      allowPrivateNetworks: true,
      ca: receiver.ca,
    };
    const a = createDispatcher({ db: coffer.services.db, logger: quiet, options });
    const b = createDispatcher({ db: other, logger: quiet, options });
    try {
      const allDelivered = async () => (await deliveriesOf(project, hook.id, 'delivered')).length === 12;
      await Promise.all([pump(allDelivered, 10_000, a), pump(allDelivered, 10_000, b)]);
      await Promise.all([runFor(300, a), runFor(300, b)]);
    } finally {
      await a.close();
      await b.close();
      if (other !== coffer.services.db) await other.close();
    }
    const seen = new Map<string, number>();
    for (const request of endpoint.requests) {
      expect(request.signatureValid).toBe(true);
      const key = `${request.headers['x-coffer-delivery-id']}#${request.headers['x-coffer-delivery-attempt']}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    expect(
      [...seen.values()].every((count) => count === 1),
      JSON.stringify([...seen]),
    ).toBe(true);
    const log = await deliveriesOf(project, hook.id);
    expect(log.map((d) => d.status)).toEqual(Array(12).fill('delivered'));
    // Every attempt recorded was sent exactly once: 12 deliveries, 8 of them needing a second attempt.
    expect(log.reduce((sum, d) => sum + d.attempts, 0)).toBe(20);
    expect(endpoint.requests).toHaveLength(20);
    for (const delivery of log) {
      const attempts = endpoint.requests
        .filter((r) => r.headers['x-coffer-delivery-id'] === delivery.id)
        .map((r) => r.headers['x-coffer-delivery-attempt']);
      expect(attempts).toEqual(delivery.attempts === 1 ? ['1'] : ['1', '2']);
    }
  });

  it('keeps an attempt that outlasts its lease to its dispatcher (heartbeat): sent once', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 200, delayMs: 3500 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    const other = await secondDb();
    const options = {
      retrySchedule: [0, 0.05, 0.05, 0.05, 0.05],
      timeoutMs: 10_000,
      allowPrivateNetworks: true,
      ca: receiver.ca,
      leaseSeconds: 1,
    };
    const a = createDispatcher({ db: coffer.services.db, logger: quiet, options });
    const b = createDispatcher({ db: other, logger: quiet, options });
    try {
      expect(await a.runOnce()).toBe(1);
      let done = false;
      const sending = a.settle().finally(() => {
        done = true;
      });
      while (!done) {
        await b.runOnce();
        await sleep(100);
      }
      await sending;
      await b.settle();
    } finally {
      await a.close();
      await b.close();
      if (other !== coffer.services.db) await other.close();
    }
    expect(endpoint.requests).toHaveLength(1);
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  it('does not hold deliveries to a fast endpoint behind a hanging one', async () => {
    const project = await newProject();
    const slow = receiver.endpoint({ fallback: 'hang' });
    const fast = receiver.endpoint({ fallback: { status: 200 } });
    const hook = await register(project, slow, ['file.uploaded']);
    const fastHook = await register(project, fast, ['file.ready']);
    // Five deliveries to the hanging endpoint are due first, then one to the fast one.
    const started = [];
    for (let i = 0; i < 5; i++) started.push(await initiate(project, { filename: `s${i}.txt`, bytes: 'x' }));
    expect((await put(started[0]!.upload_url, 'x')).status).toBe(200);
    expect((await project.call('POST', `/files/${started[0]!.file_id}/confirm`)).body.status).toBe('ready');

    // The service's dispatcher, with a deadline long enough that the slow requests surely still hang.
    const dispatcher = ownDispatcher();
    try {
      const began = Date.now();
      expect(await dispatcher.runOnce()).toBe(6);
      await fast.waitFor(1, 3000);
      const deadline = Date.now() + 3000;
      while ((await deliveriesOf(project, fastHook.id, 'delivered')).length !== 1) {
        if (Date.now() > deadline) throw new Error('the fast delivery was not recorded');
        await sleep(10);
      }
      // Delivered while none of the slow ones has an outcome: all five are held open by the endpoint.
      const slowLog = await deliveriesOf(project, hook.id);
      expect(slowLog.map((d) => [d.status, d.attempts, d.last_error])).toEqual(
        Array(5).fill(['pending', 1, null]),
      );
      await slow.waitFor(5, 3000);
      expect(slow.hanging).toBe(5);
      expect(Date.now() - began).toBeLessThan(5000);

      // Once the slow endpoint answers, those attempts finish too.
      slow.release(503);
      await dispatcher.settle();
      const failed = await deliveriesOf(project, hook.id, 'pending');
      expect(failed.map((d) => [d.attempts, d.last_response_status])).toEqual(Array(5).fill([1, 503]));
    } finally {
      slow.release(503);
      await dispatcher.close();
    }
  });

  it('sends at most its concurrency at once; the deliveries claimed beyond wait for a slot, then get their own deadline', async () => {
    const project = await newProject();
    const slow = receiver.endpoint({ fallback: 'hang' });
    const hook = await register(project, slow, ['file.uploaded']);
    for (let i = 0; i < 4; i++) await initiate(project, { filename: `c${i}.txt` });
    const dispatcher = ownDispatcher({ concurrency: 2, timeoutMs: 1000 });
    try {
      // All four claimed at once (the runner holds twice as many deliveries as it sends), two sent.
      expect(await dispatcher.runOnce()).toBe(4);
      await slow.waitFor(2, 3000);
      expect(slow.requests).toHaveLength(2);
      // The two that waited are sent once the first two time out, and time out in their turn.
      await dispatcher.settle();
      expect(new Set(slow.requests.map((r) => r.headers['x-coffer-delivery-id'])).size).toBe(4);
      const timedOut = await deliveriesOf(project, hook.id, 'pending');
      expect(timedOut.map((d) => [d.attempts, d.last_response_status])).toEqual(Array(4).fill([1, null]));
      for (const delivery of timedOut) expect(delivery.last_error).toMatch(/: timed out$/);
    } finally {
      slow.release(503);
      await dispatcher.close();
    }
  });

  it('gives up on a hanging endpoint at COFFER_WEBHOOK_TIMEOUT_MS without holding back the others', async () => {
    const project = await newProject();
    const slow = receiver.endpoint({ fallback: 'hang' });
    const fast = receiver.endpoint({ fallback: { status: 200 } });
    const hook = await register(project, slow, ['file.uploaded']);
    const fastHook = await register(project, fast, ['file.uploaded']);
    await initiate(project);
    const began = Date.now();
    expect(await coffer.services.dispatcher.runOnce()).toBe(2);
    await coffer.services.dispatcher.settle();
    const elapsed = Date.now() - began;
    expect(elapsed).toBeGreaterThanOrEqual(450);
    expect(elapsed).toBeLessThan(3000);
    expect((await deliveriesOf(project, fastHook.id))[0]).toMatchObject({ status: 'delivered', attempts: 1 });
    const [timedOut] = await deliveriesOf(project, hook.id);
    expect(timedOut).toMatchObject({ status: 'pending', attempts: 1, last_response_status: null });
    expect(timedOut.last_error).toMatch(/^(TimeoutError|UND_ERR_HEADERS_TIMEOUT): timed out$/);
    expect(fast.requests).toHaveLength(1);
    expect(slow.requests).toHaveLength(1);
  });
});
