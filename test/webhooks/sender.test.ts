import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSender, type Send } from '../../src/modules/webhooks/sender.ts';
import { type Receiver, startReceiver } from '../support/receiver.ts';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());

const attempt = (url: string, body = '{"n":1}'): Send => ({
  url,
  body,
  signingSecret: 'whsec_test',
  headers: { 'content-type': 'application/json' },
});

describe('the sending thread', () => {
  it('signs each request and answers its outcome', async () => {
    const sender = createSender({ allowPrivateNetworks: true, timeoutMs: 5000, ca: receiver.ca });
    const endpoint = receiver.endpoint({ fallback: { status: 204 }, secret: 'whsec_test' });
    try {
      const outcomes = await Promise.all(
        [1, 2, 3].map((n) => sender.send(attempt(endpoint.url, `{"n":${n}}`), new AbortController().signal)),
      );
      expect(outcomes).toEqual([1, 2, 3].map(() => ({ ok: true, status: 204, error: null })));
      expect(endpoint.requests.map((r) => r.signatureValid)).toEqual([true, true, true]);
    } finally {
      await sender.close();
    }
  });

  it('aborts a request whose lease was lost', async () => {
    const sender = createSender({ allowPrivateNetworks: true, timeoutMs: 5000, ca: receiver.ca });
    const endpoint = receiver.endpoint({ fallback: 'hang' });
    try {
      const lease = new AbortController();
      const outcome = sender.send(attempt(endpoint.url), lease.signal);
      await endpoint.waitFor(1);
      lease.abort();
      expect(await outcome).toMatchObject({
        ok: false,
        status: null,
        error: expect.stringMatching(/^AbortError/),
      });
    } finally {
      await sender.close();
    }
  });

  it('fails the requests in flight when the thread stops, and starts a new one for the next', async () => {
    const sender = createSender({ allowPrivateNetworks: true, timeoutMs: 5000, ca: receiver.ca });
    const hanging = receiver.endpoint({ fallback: 'hang' });
    const answering = receiver.endpoint({ fallback: { status: 200 } });
    try {
      const stranded = sender.send(attempt(hanging.url), new AbortController().signal);
      await hanging.waitFor(1);
      await sender.close();
      expect(await stranded).toEqual({
        ok: false,
        status: null,
        error: 'ESENDER: the sending thread stopped',
      });
      expect(await sender.send(attempt(answering.url), new AbortController().signal)).toEqual({
        ok: true,
        status: 200,
        error: null,
      });
      expect(answering.requests).toHaveLength(1);
    } finally {
      await sender.close();
      hanging.release(200);
    }
  });
});
