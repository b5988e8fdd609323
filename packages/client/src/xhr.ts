/** Browser PUTs through XMLHttpRequest: the only browser API that reports upload progress. */
import { abortedError, networkError } from './errors.js';
import { asBlob, type PutTransport } from './transport.js';

/**
 * The response headers a script may read: for another origin, only those its CORS rule exposes.
 * Asking getResponseHeader for any other one makes the browser log an error, so none is asked for.
 */
function readableHeaders(xhr: XMLHttpRequest): Map<string, string> {
  const headers = new Map<string, string>();
  for (const line of xhr.getAllResponseHeaders().split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return headers;
}

export const xhrTransport: PutTransport = ({ url, body, contentType, size, signal, onProgress }) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortedError(signal));
    const xhr = new XMLHttpRequest();
    const onAbort = () => xhr.abort();
    const settle = () => signal?.removeEventListener('abort', onAbort);
    xhr.open('PUT', url);
    // The browser sets Content-Length from the body; a Blob body gets no charset.
    xhr.setRequestHeader('Content-Type', contentType);
    if (onProgress) xhr.upload.onprogress = (event) => onProgress(Math.min(event.loaded, size));
    xhr.onload = () => {
      settle();
      if (xhr.status >= 200 && xhr.status < 300) onProgress?.(size);
      const headers = readableHeaders(xhr);
      resolve({
        status: xhr.status,
        etag: headers.get('etag') ?? null,
        text: xhr.responseText,
        requestId: headers.get('x-request-id') ?? null,
      });
    };
    xhr.onerror = () => {
      settle();
      reject(networkError(new Error(`PUT ${new URL(url).host} failed`)));
    };
    xhr.onabort = () => {
      settle();
      reject(abortedError(signal));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    xhr.send(asBlob(body));
  });
