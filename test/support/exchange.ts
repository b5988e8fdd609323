import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * One HTTP/1.1 request (or `version`'s) over its own connection, written by hand: the head is sent at once, the body
 * only when the test writes it, so that what the server answers before the body is seen as it is.
 * Answers are read as they come, a 100 Continue as one of its own.
 */
export class Exchange {
  readonly #socket: Socket;
  #received = Buffer.alloc(0);
  #ended = false;
  #wake: (() => void) | undefined;
  readonly closed: Promise<void>;

  /** `origin` is the server's (http://host:port); `path` has the query, if any. */
  constructor(
    origin: string,
    method: string,
    path: string,
    headers: Record<string, string>,
    version = '1.1',
  ) {
    const { hostname, port, host } = new URL(origin);
    this.#socket = connect(Number(port), hostname);
    this.#socket.on('data', (chunk: Buffer) => {
      this.#received = Buffer.concat([this.#received, chunk]);
      this.#wake?.();
    });
    // A reset once the server has closed (the client still writing) only ends the exchange.
    this.#socket.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      this.#socket.on('close', () => {
        this.#ended = true;
        this.#wake?.();
        resolve();
      }),
    );
    const fields = Object.entries({ host, ...headers }).map(([name, value]) => `${name}: ${value}`);
    this.#socket.write(`${[`${method} ${path} HTTP/${version}`, ...fields].join('\r\n')}\r\n\r\n`);
  }

  /** The next answer, a 100 Continue or a final one (its body read by its Content-Length). */
  async next(): Promise<Answer> {
    for (;;) {
      const answer = this.#take();
      if (answer) return answer;
      if (this.#ended) throw new Error(`closed after ${JSON.stringify(this.#received.toString())}`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  /** The next answer, or undefined when none came within `ms`: a server that holds the connection. */
  nextWithin(ms: number): Promise<Answer | undefined> {
    return Promise.race([this.next(), sleep(ms).then(() => undefined)]);
  }

  /** What arrived after the answers read so far. */
  get rest(): string {
    return this.#received.toString('latin1');
  }

  async write(bytes: Buffer): Promise<void> {
    await new Promise<void>((resolve, reject) =>
      this.#socket.write(bytes, (error) => (error ? reject(error) : resolve())),
    );
  }

  close(): void {
    this.#socket.destroy();
  }

  #take(): Answer | undefined {
    const end = this.#received.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const [statusLine, ...lines] = this.#received.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(statusLine!.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = status < 200 || status === 204 ? 0 : Number(headers['content-length']);
    if (this.#received.length < end + 4 + length) return undefined;
    const body = this.#received.subarray(end + 4, end + 4 + length).toString();
    this.#received = this.#received.subarray(end + 4 + length);
    return { status, headers, body };
  }
}
