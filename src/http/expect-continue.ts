import type { IncomingMessage, Server, ServerResponse } from 'node:http';

/**
 * `Expect: 100-continue` answered as servers made for uploads answer it (S3, tusd): the request goes
 * through like any other, and 100 Continue is sent only when something first reads its body (a body
 * parser, a pipeline, an iteration: each pulls through `_read`). A request refused before that (its
 * signature, credential, offset, size, quota, rate limit) has the refusal as its only answer, and the
 * client never sends the body it announced. Node answers such a refusal with `Connection: close`, as
 * the client may still send the body: its bytes are read as that body, never as another request.
 */
export function continueOnRead(server: Server): void {
  // With a listener, Node no longer sends 100 Continue itself before the request is handled.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    const read = request._read;
    request._read = function (this: IncomingMessage, size: number) {
      request._read = read;
      // Node pulls the rest of a body left unread once the answer is sent, to drain it: too late to
      // ask for it then (and writeContinue would throw, the headers being sent).
      if (!response.headersSent) response.writeContinue();
      return read.call(this, size);
    };
    server.emit('request', request, response);
  });
}
