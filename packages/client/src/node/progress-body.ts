import type { PutBody } from '../transport.js';

const CHUNK = 64 * 1024;

/**
 * The body as a stream that counts what the HTTP client pulls from it: with an explicit
 * Content-Length, fetch sends it as is (no chunked encoding), and progress follows the socket.
 */
export function progressBody(
  body: PutBody,
  onProgress: (loaded: number) => void,
): ReadableStream<Uint8Array> {
  let loaded = 0;
  const reader = body instanceof Blob ? body.stream().getReader() : undefined;
  const next = async (): Promise<Uint8Array | undefined> => {
    if (reader) {
      const { done, value } = await reader.read();
      return done ? undefined : value;
    }
    const bytes = body as Uint8Array;
    return loaded < bytes.byteLength ? bytes.subarray(loaded, loaded + CHUNK) : undefined;
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const chunk = await next();
        if (!chunk) return controller.close();
        controller.enqueue(chunk);
        loaded += chunk.byteLength;
        onProgress(loaded);
      },
      cancel: (reason) => reader?.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}
