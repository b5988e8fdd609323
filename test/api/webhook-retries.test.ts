import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { initiate } from '../support/files.ts';
import { sleep } from '../support/processes.ts';
import { deliveriesOf, expectError, expectSigned, register, webhooksSuite } from '../support/webhooks.ts';

// The retries of a webhook delivery that fails, on the schedule, up to dead; redelivery; and what a
// webhook deleted or deactivated meanwhile is sent no more.
const { coffer, receiver, newProject, pump, runFor } = webhooksSuite();

/** Waits until one delivery is due, sends it and records the outcome: exactly one attempt. */
async function step(timeoutMs = 5000) {
  const d = coffer.services.dispatcher;
  const deadline = Date.now() + timeoutMs;
  while ((await d.runOnce()) === 0) {
    if (Date.now() > deadline) throw new Error('step: no delivery became due');
    await sleep(10);
  }
  await d.settle();
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

describe('retries', () => {
  it('retries a 500 (1 MB body), a redirect, a timeout and a 503 on schedule, then marks it dead', async () => {
    const project = await newProject();
    const target = receiver.endpoint();
    const endpoint = receiver.endpoint({
      script: [
        { status: 500, body: 'x'.repeat(1024 * 1024) },
        { redirect: target.url },
        'hang',
        { status: 503, body: 'maintenance' },
      ],
      fallback: { status: 500, body: 'still broken' },
    });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    const [pending] = await deliveriesOf(project, hook.id, 'pending');
    expect(pending).toMatchObject({
      status: 'pending',
      attempts: 0,
      last_response_status: null,
      last_error: null,
    });

    const current = async () => {
      const items = await deliveriesOf(project, hook.id);
      expect(items).toHaveLength(1);
      return items[0];
    };
    const expectRetryScheduled = (delivery: any) => {
      expect(delivery.status).toBe('pending');
      expect(new Date(delivery.next_attempt_at).getTime() - new Date(delivery.updated_at).getTime()).toBe(
        200,
      );
    };

    await step();
    let delivery = await current();
    expect(delivery).toMatchObject({ attempts: 1, last_response_status: 500 });
    expect(delivery.last_error).toMatch(/^HTTP 500: x+$/);
    expect(delivery.last_error.length).toBeLessThanOrEqual(1100);
    expectRetryScheduled(delivery);

    await step();
    delivery = await current();
    expect(delivery).toMatchObject({ attempts: 2, last_response_status: 302 });
    expect(delivery.last_error).toMatch(/redirect/);
    expectRetryScheduled(delivery);
    expect(target.requests).toHaveLength(0);

    const started = Date.now();
    await step();
    expect(Date.now() - started).toBeLessThan(2000);
    delivery = await current();
    expect(delivery).toMatchObject({ attempts: 3, last_response_status: null });
    expect(delivery.last_error).toMatch(/^(TimeoutError|UND_ERR_HEADERS_TIMEOUT): timed out$/);
    expectRetryScheduled(delivery);

    await step();
    delivery = await current();
    expect(delivery).toMatchObject({
      attempts: 4,
      last_response_status: 503,
      last_error: 'HTTP 503: maintenance',
    });
    expectRetryScheduled(delivery);

    await step();
    delivery = await current();
    expect(delivery).toMatchObject({
      status: 'dead',
      attempts: 5,
      next_attempt_at: null,
      last_response_status: 500,
      last_error: 'HTTP 500: still broken',
    });
    expect(await deliveriesOf(project, hook.id, 'dead')).toEqual([delivery]);
    expect(await deliveriesOf(project, hook.id, 'pending')).toEqual([]);

    // Never a sixth attempt.
    await runFor(800);
    expect(endpoint.requests).toHaveLength(5);
    expect(target.requests).toHaveLength(0);
    expect((await current()).status).toBe('dead');

    // Five attempts of one event: same event id and body, numbered 1..5, each signed, spaced by the schedule.
    const eventId = endpoint.requests[0]!.headers['x-coffer-event-id'];
    endpoint.requests.forEach((request, i) => {
      expectSigned(request, hook.signing_secret, 'file.uploaded');
      expect(request.headers['x-coffer-event-id']).toBe(eventId);
      expect(request.headers['x-coffer-delivery-attempt']).toBe(String(i + 1));
      expect(request.raw.equals(endpoint.requests[0]!.raw)).toBe(true);
      if (i > 0) expect(request.at - endpoint.requests[i - 1]!.at).toBeGreaterThanOrEqual(195);
    });
    // The attempt after the timeout came 0.2 s after the 0.5 s deadline.
    expect(endpoint.requests[3]!.at - endpoint.requests[2]!.at).toBeGreaterThanOrEqual(650);

    // Redelivery sends it again, as attempt 1 of the same event.
    endpoint.fallback = { status: 204 };
    const redelivered = await project.call(
      'POST',
      `/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`,
    );
    expect(redelivered.status).toBe(202);
    expect(redelivered.body).toMatchObject({ id: delivery.id, status: 'pending', attempts: 0 });
    await pump(() => endpoint.requests.length === 6);
    const again = endpoint.requests[5]!;
    expectSigned(again, hook.signing_secret, 'file.uploaded');
    expect(again.headers['x-coffer-event-id']).toBe(eventId);
    expect(again.headers['x-coffer-delivery-attempt']).toBe('1');
    expect(again.raw.equals(endpoint.requests[0]!.raw)).toBe(true);
    await pump(async () => (await current()).status === 'delivered');
    expect(await current()).toMatchObject({
      status: 'delivered',
      attempts: 1,
      last_response_status: 204,
      last_error: null,
      next_attempt_at: null,
    });
    expect(target.requests).toHaveLength(0);
  });

  it('counts a connection error as a failure, up to dead', async () => {
    const project = await newProject();
    const port = await closedPort();
    const created = await project.call('POST', '/webhooks', {
      body: { url: `https://127.0.0.1:${port}/hook`, events: ['file.uploaded'] },
    });
    expect(created.status).toBe(201);
    await initiate(project);
    await pump(async () => (await deliveriesOf(project, created.body.id, 'dead')).length === 1);
    const [dead] = await deliveriesOf(project, created.body.id);
    expect(dead).toMatchObject({ status: 'dead', attempts: 5, last_response_status: null });
    expect(dead.last_error).toMatch(/^ECONNREFUSED: /);
  });

  it('refuses to redeliver a pending delivery with 409 INVALID_STATE, and an unknown one with 404', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint();
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    const [pending] = await deliveriesOf(project, hook.id);
    expect(pending.status).toBe('pending');
    const reply = await project.call('POST', `/webhooks/${hook.id}/deliveries/${pending.id}/redeliver`);
    expectError(reply, 409, 'INVALID_STATE');
    expectError(
      await project.call('POST', `/webhooks/${hook.id}/deliveries/dlv_01ARZ3NDEKTSV4RRFFQ69G5FAV/redeliver`),
      404,
      'NOT_FOUND',
    );
    // A delivery of another webhook of the same project is not this webhook's.
    const other = await register(project, receiver.endpoint(), ['file.ready']);
    expectError(
      await project.call('POST', `/webhooks/${other.id}/deliveries/${pending.id}/redeliver`),
      404,
      'NOT_FOUND',
    );
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({
      id: pending.id,
      status: 'pending',
      attempts: 0,
    });

    // Delivered, it can be sent again.
    await pump(() => endpoint.requests.length === 1);
    expect(
      (await project.call('POST', `/webhooks/${hook.id}/deliveries/${pending.id}/redeliver`)).status,
    ).toBe(202);
    await pump(() => endpoint.requests.length === 2);
    expect(endpoint.requests[1]!.headers['x-coffer-event-id']).toBe(
      endpoint.requests[0]!.headers['x-coffer-event-id'],
    );
  });

  it('cancels pending retries when the webhook is deleted, and sends nothing more', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 500 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    await step();
    const [failed] = await deliveriesOf(project, hook.id);
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, last_response_status: 500 });

    expect((await project.call('DELETE', `/webhooks/${hook.id}`)).status).toBe(204);
    expectError(await project.call('GET', `/webhooks/${hook.id}/deliveries`), 404, 'webhook_not_found');
    const rows = await coffer.services.db.query<{ status: string; attempts: number }>(
      'SELECT status, attempts FROM deliveries WHERE webhook_id = $1',
      [hook.id],
    );
    expect(rows).toEqual([{ status: 'cancelled', attempts: 1 }]);
    await runFor(700);
    expect(endpoint.requests).toHaveLength(1);
  });

  it('keeps a delivery cancelled when the webhook is deleted during an attempt', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: 'hang' });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    expect(await coffer.services.dispatcher.runOnce()).toBe(1);
    await endpoint.waitFor(1);
    expect((await project.call('DELETE', `/webhooks/${hook.id}`)).status).toBe(204);
    await coffer.services.dispatcher.settle();
    const rows = await coffer.services.db.query<{ status: string }>(
      'SELECT status FROM deliveries WHERE webhook_id = $1',
      [hook.id],
    );
    expect(rows).toEqual([{ status: 'cancelled' }]);
    await runFor(700);
    expect(endpoint.requests).toHaveLength(1);
  });

  it('sends nothing more to a webhook deactivated while a retry is pending', async () => {
    const project = await newProject();
    const endpoint = receiver.endpoint({ fallback: { status: 500 } });
    const hook = await register(project, endpoint, ['file.uploaded']);
    await initiate(project);
    await step();
    expect((await project.call('PUT', `/webhooks/${hook.id}`, { body: { is_active: false } })).status).toBe(
      200,
    );
    await runFor(700);
    expect(endpoint.requests).toHaveLength(1);
    expect((await deliveriesOf(project, hook.id))[0]).toMatchObject({ status: 'cancelled', attempts: 1 });
  });
});
