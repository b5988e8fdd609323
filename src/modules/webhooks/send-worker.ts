import { parentPort, workerData } from 'node:worker_threads';
import { request, type Dispatcher as UndiciDispatcher } from 'undici';
import { createSafeAgent, type SafeAgentOptions } from '../../infra/http/safe-agent.ts';
import { perTurn } from '../../lib/per-turn.ts';
import { hmacHex } from '../../lib/secrets.ts';

/** Messages of sender.ts: a signed POST to send, or the abort of one (its lease lost). */
export type SendRequest =
  | {
      type: 'send';
      id: number;
      url: string;
      body: string;
      signingSecret: string;
      headers: Record<string, string>;
    }
  | { type: 'abort'; id: number };

export interface Outcome {
  ok: boolean;
  status: number | null;
  error: string | null;
}

/** Outcomes of the sends that finished in one turn of the event loop. */
export type SendReply = { id: number; outcome: Outcome }[];

/** A failed endpoint's answer is read only this far, to show why it failed. */
const RESPONSE_SNIPPET_BYTES = 1024;

type Body = UndiciDispatcher.ResponseData['body'];

/**
 * Drops a response body: a short one is read to its end, so the connection stays reusable; a
 * longer one is cut. undici's body emits 'error' when destroyed before its end: without a
 * listener that is an uncaught exception, which would end the thread.
 */
async function discard(body: Body): Promise<void> {
  body.on('error', () => {});
  await body.dump({ limit: RESPONSE_SNIPPET_BYTES }).catch(() => body.destroy());
}

async function readSnippet(body: Body): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk);
      length += chunk.length;
      if (length >= RESPONSE_SNIPPET_BYTES) break;
    }
  } finally {
    await discard(body);
  }
  return Buffer.concat(chunks).subarray(0, RESPONSE_SNIPPET_BYTES).toString('utf8');
}

const options = workerData as SafeAgentOptions;
const agent = createSafeAgent(options);
const port = parentPort!;
const inFlight = new Map<number, AbortController>();

/** One attempt, signed here: its deadline runs from its request. */
async function attempt(send: Extract<SendRequest, { type: 'send' }>, controller: AbortController) {
  const timer = setTimeout(
    () => controller.abort(new DOMException('the attempt timed out', 'TimeoutError')),
    options.timeoutMs,
  );
  try {
    const response = await request(send.url, {
      method: 'POST',
      body: send.body,
      dispatcher: agent,
      signal: controller.signal,
      headers: { ...send.headers, 'x-coffer-signature': hmacHex(send.signingSecret, send.body) },
    });
    const { statusCode } = response;
    if (statusCode >= 200 && statusCode < 300) {
      await discard(response.body);
      return { ok: true, status: statusCode, error: null };
    }
    if (statusCode >= 300 && statusCode < 400) {
      await discard(response.body);
      const location = response.headers.location ?? 'elsewhere';
      return { ok: false, status: statusCode, error: `redirect to ${location} is not followed` };
    }
    const snippet = await readSnippet(response.body);
    return { ok: false, status: statusCode, error: `HTTP ${statusCode}${snippet ? `: ${snippet}` : ''}` };
  } catch (error) {
    const err = error as Error & { code?: unknown };
    // Node's errors carry a string code (ECONNREFUSED, UND_ERR_…); a DOMException (the deadline) a
    // legacy number, which says nothing: its name is used instead.
    const code = typeof err.code === 'string' ? err.code : err.name;
    const reason = err.name === 'TimeoutError' || code.includes('TIMEOUT') ? 'timed out' : err.message;
    return { ok: false, status: null, error: `${code}: ${reason}` };
  } finally {
    clearTimeout(timer);
  }
}

// Outcomes go back together once per turn of the event loop: one message for many deliveries.
const reply = perTurn<SendReply[number]>((finished) => port.postMessage(finished));

port.on('message', (requests: SendRequest[]) => {
  for (const message of requests) {
    if (message.type === 'abort') {
      inFlight.get(message.id)?.abort(new DOMException('the delivery was claimed again', 'AbortError'));
      continue;
    }
    const controller = new AbortController();
    inFlight.set(message.id, controller);
    void attempt(message, controller).then((outcome) => {
      inFlight.delete(message.id);
      reply({ id: message.id, outcome });
    });
  }
});
