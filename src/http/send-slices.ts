import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { BUFFER_SIZE, type Slice } from '../infra/storage/local/slices.ts';

/** Adds bytes to a transfer counter. */
export type Count = (bytes: number) => void;

/**
 * Answers with the reply's status and headers (Content-Length included) and the bytes of `slices`
 * (of the local store), written straight to the socket: no stream between the files and it. A HEAD
 * request gets the headers alone. The first file is opened before the headers are written, so an
 * object removed meanwhile is answered as an error; a failure once they are cuts the connection: the
 * client sees a short body, never a wrong one. The reply is hijacked: onRequest and onResponse hooks
 * apply to it, onSend hooks do not.
 */
export async function sendSlices(
  request: FastifyRequest,
  reply: FastifyReply,
  slices: Slice[],
  sent?: Count,
): Promise<void> {
  const head = request.method === 'HEAD';
  const [first] = slices;
  let opened = head || !first || first.bytes ? undefined : await open(first.path, 'r');
  const response = reply.raw;
  try {
    // Before the reply is given up: a header Node refuses is answered as an error by Fastify.
    response.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders);
  } catch (error) {
    await opened?.close();
    throw error;
  }
  reply.hijack();
  if (head) return void response.end();
  // Bytes already read that end the answer go with its end: headers and body in one write.
  const tail = slices.at(-1)?.bytes;
  try {
    for (const slice of tail ? slices.slice(0, -1) : slices) {
      if (slice.bytes) {
        await send(response, slice.bytes, sent);
        continue;
      }
      const handle = opened ?? (await open(slice.path, 'r'));
      opened = undefined;
      try {
        await streamFile(handle, response, slice.start, slice.end, sent);
      } finally {
        await handle.close();
      }
    }
    if (tail) response.end(tail, () => sent?.(tail.length));
    else response.end();
  } catch (error) {
    request.log.warn({ err: error }, 'download interrupted');
    response.destroy();
  }
}

/**
 * Writes bytes `start`..`end` of the file to the response through two buffers used in turn: one
 * is read into while the other is being sent. A large download allocates nothing per chunk, so
 * it leaves no garbage behind (what slows a busy process down is the collector, not the disk).
 */
async function streamFile(
  handle: FileHandle,
  response: ServerResponse,
  start: number,
  end: number,
  sent?: Count,
): Promise<void> {
  const size = Math.min(BUFFER_SIZE, end - start + 1);
  // Each made when first used: an object that one read brings whole needs only one.
  const buffers: (Buffer | undefined)[] = [undefined, undefined];
  const sending: (Promise<void> | undefined)[] = [undefined, undefined];
  let position = start;
  for (let turn = 0; position <= end; turn ^= 1) {
    await sending[turn]; // this buffer's previous chunk has reached the socket
    if (response.destroyed) throw new Error('the client went away');
    const buffer = buffers[turn] ?? Buffer.allocUnsafeSlow(size);
    buffers[turn] = buffer;
    const { bytesRead } = await handle.read(buffer, 0, Math.min(size, end - position + 1), position);
    if (bytesRead === 0) throw new Error('the object is shorter than its recorded size');
    position += bytesRead;
    const write = send(response, buffer.subarray(0, bytesRead), sent);
    // Awaited in turn; one still in flight when the other fails must not go unhandled.
    write.catch(() => undefined);
    sending[turn] = write;
  }
  await Promise.all(sending);
}

/** Writes `bytes` to the response; settles once they have reached the socket. */
function send(response: ServerResponse, bytes: Buffer, sent?: Count): Promise<void> {
  return new Promise((resolve, reject) => {
    response.write(bytes, (error) => {
      if (error) return reject(error);
      sent?.(bytes.length);
      resolve();
    });
  });
}
