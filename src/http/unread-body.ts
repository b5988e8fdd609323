import type { IncomingMessage } from 'node:http';

/**
 * Reads and drops what is left of a request's body once its answer is sent, as Node does with a body
 * nothing began to read (but not with one a handler began to read and let go of, a refusal mid-body):
 * the connection stays readable, so that a client still sending gets to its answer rather than a
 * reset, and the next request it sends on that connection is read and answered. Called once the
 * answer is sent, so that reading never asks a client waiting for a 100 Continue for its body.
 */
export function dropUnreadBody(request: IncomingMessage): void {
  if (request.complete || request.destroyed) return;
  // A reader let go of mid-body may still listen for 'readable', which keeps resume() from making the
  // body flow, and may have left bytes that were announced already: they are read here, then the rest.
  const drop = () => {
    while (request.read() !== null);
  };
  request.on('readable', drop);
  drop();
}
