import { Worker } from 'node:worker_threads';
import type { SafeAgentOptions } from '../../infra/http/safe-agent.ts';
import { perTurn } from '../../lib/per-turn.ts';
import type { Outcome, SendReply, SendRequest } from './send-worker.ts';

export type { Outcome } from './send-worker.ts';

/** What a delivery's POST needs: the signature is made beside the request. */
export interface Send {
  url: string;
  body: string;
  signingSecret: string;
  headers: Record<string, string>;
}

/**
 * Webhook requests sent from a thread of their own: TLS, HTTP and signing no longer share the
 * thread that runs the database (the whole server, embedded), and each side keeps a core busy.
 * Requests and outcomes cross in one message per turn of the event loop each way.
 */
export function createSender(options: SafeAgentOptions) {
  let worker: Worker | undefined;
  let nextId = 1;
  const waiting = new Map<number, (outcome: Outcome) => void>();

  function settleAll(error: string): void {
    for (const [id, settle] of waiting) {
      waiting.delete(id);
      settle({ ok: false, status: null, error });
    }
  }

  function started(): Worker {
    if (worker) return worker;
    const thread = new Worker(new URL('./send-worker.ts', import.meta.url), { workerData: options });
    thread.unref();
    thread.on('message', (replies: SendReply) => {
      for (const { id, outcome } of replies) {
        waiting.get(id)?.(outcome);
        waiting.delete(id);
      }
    });
    thread.on('error', (error) => settleAll(`ESENDER: ${error.message}`));
    thread.on('exit', () => {
      worker = undefined;
      settleAll('ESENDER: the sending thread stopped');
    });
    worker = thread;
    return thread;
  }

  const post = perTurn<SendRequest>((batch) => started().postMessage(batch));

  return {
    /** Sends one attempt; `signal` aborts it (its lease lost). Never rejects: a failure is an outcome. */
    send(request: Send, signal: AbortSignal): Promise<Outcome> {
      const id = nextId++;
      const outcome = new Promise<Outcome>((resolve) => waiting.set(id, resolve));
      post({ type: 'send', id, ...request });
      const abort = () => post({ type: 'abort', id });
      signal.addEventListener('abort', abort, { once: true });
      return outcome.finally(() => signal.removeEventListener('abort', abort));
    },

    async close(): Promise<void> {
      await worker?.terminate();
    },
  };
}
