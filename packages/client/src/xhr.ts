/** Browser PUTs through XMLHttpRequest: the only browser API that reports upload progress. */
import { abortedError, networkError } from './errors.js';
import { asBlob, type PutTransport } from './transport.js';

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
      resolve({
        status: xhr.status,
        etag: xhr.getResponseHeader('ETag'),
        text: xhr.responseText,
        requestId: xhr.getResponseHeader('X-Request-Id'),
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
