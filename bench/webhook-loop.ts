/** The baseline of the webhook benchmark: a plain undici loop POSTing signed envelopes to the receiver. */
import { createHmac } from 'node:crypto';
import { Agent, request } from 'undici';
import type { WebhookReceiver } from './helper-servers.ts';
import { pool } from './measure.ts';
import { machineBusySeconds } from './proc.ts';
import type { ReceiverStats } from './webhook-receiver.ts';

interface LoopResult {
  stats: ReceiverStats;
  /** Seconds on the client, first request sent to last answer read. */
  seconds: number;
  clientCpu: number;
  receiverCpu: number;
  /** CPU seconds of every process on the machine meanwhile. */
  machineCpu: number;
}

/**
 * `count` POSTs of an event envelope to `url`, `concurrency` in flight, each built, signed (HMAC-SHA256
 * hex) and sent with the dispatcher's headers through a keep-alive undici agent.
 */
export async function plainLoop(
  receiver: WebhookReceiver,
  path: string,
  secret: string,
  count: number,
  concurrency: number,
  envelope: (i: number) => unknown,
): Promise<LoopResult> {
  const agent = new Agent({ connections: concurrency, connect: { ca: receiver.ca } });
  const url = `${receiver.origin}${path}`;
  const send = async (i: number) => {
    const body = JSON.stringify(envelope(i));
    const response = await request(url, {
      method: 'POST',
      body,
      dispatcher: agent,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'Coffer-Bench/1.0',
        'x-coffer-signature': createHmac('sha256', secret).update(body).digest('hex'),
        'x-coffer-event': 'file.uploaded',
        'x-coffer-event-id': `evt_plain_${i}`,
        'x-coffer-delivery-id': `dlv_plain_${i}`,
        'x-coffer-delivery-attempt': '1',
      },
    });
    await response.body.dump();
    if (response.statusCode !== 200) throw new Error(`plain POST: ${response.statusCode}`);
  };
  try {
    await pool(Math.min(500, count), concurrency, send); // connections and TLS sessions up
    receiver.reset();
    const receiverCpu = receiver.cpuSeconds();
    const clientCpu = process.cpuUsage();
    const machineCpu = machineBusySeconds();
    const start = performance.now();
    await pool(count, concurrency, send);
    const seconds = (performance.now() - start) / 1000;
    const usage = process.cpuUsage(clientCpu);
    return {
      stats: await receiver.stats(true),
      seconds,
      clientCpu: (usage.user + usage.system) / 1e6,
      receiverCpu: receiver.cpuSeconds() - receiverCpu,
      machineCpu: machineBusySeconds() - machineCpu,
    };
  } finally {
    await agent.close();
  }
}
