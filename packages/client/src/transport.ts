/** PUTs of file bytes to presigned URLs (no Authorization: the signature is in the URL). */
import type { Fetch } from './api.js';
import { abortedError, networkError } from './errors.js';

export type PutBody = Blob | Uint8Array;

export interface PutRequest {
  url: string;
  body: PutBody;
  /** Sent as is: the URL is signed for it, so nothing (no charset) may be added. */
  contentType: string;
  size: number;
  signal?: AbortSignal | undefined;
  /** Bytes of this body sent so far. */
  onProgress?: ((loaded: number) => void) | undefined;
}

export interface PutAnswer {
  status: number;
  etag: string | null;
  text: string;
  requestId: string | null;
}

/** Sends one body; throws only CofferError NETWORK_ERROR or ABORTED, any HTTP status is an answer. */
export type PutTransport = (request: PutRequest) => Promise<PutAnswer>;

/** A body that every transport sends as bytes (the explicit Content-Type header wins over a Blob's type). */
export const asBlob = (body: PutBody): Blob =>
  body instanceof Blob ? body : new Blob([body as Uint8Array<ArrayBuffer>]);

/** Builds a streamed body that reports its progress (Node.js), or undefined to send the body whole. */
export type ProgressBody = (body: PutBody, onProgress: (loaded: number) => void) => BodyInit | undefined;

/**
 * A fetch PUT. `stream` sends the body through a counting stream with an explicit Content-Length
 * (Node.js), so progress follows the bytes; otherwise progress is reported when the body is sent.
 * The stream is used even when nobody listens: it sends views of the bytes, where a Blob would be a
 * copy of every part. No redirect is followed (a presigned URL has none), so fetch keeps no second
 * copy of the body to send again.
 */
export function fetchTransport(fetch: Fetch, stream: ProgressBody = () => undefined): PutTransport {
  return async ({ url, body, contentType, size, signal, onProgress }) => {
    const headers: Record<string, string> = { 'content-type': contentType, 'content-length': String(size) };
    const streamed = stream(body, onProgress ?? (() => {}));
    const init: RequestInit & { duplex?: 'half' } = { method: 'PUT', headers, signal, redirect: 'error' };
    if (streamed) {
      init.body = streamed;
      init.duplex = 'half';
    } else {
      init.body = asBlob(body);
    }
    try {
      const response = await fetch(url, init);
      const text = await response.text();
      if (!streamed && response.ok) onProgress?.(size);
      return {
        status: response.status,
        etag: response.headers.get('etag'),
        text,
        requestId: response.headers.get('x-request-id') ?? response.headers.get('x-amz-request-id'),
      };
    } catch (error) {
      if (signal?.aborted) throw abortedError(signal);
      throw networkError(error);
    }
  };
}
