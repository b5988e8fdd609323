/**
 * @coffer/client for browsers (and any runtime with fetch): nothing here imports a Node.js module.
 * Node.js resolves the package to ./node.js instead, which adds paths, Node streams and a file store.
 */
import { type ClientOptions, type CofferClient, createCofferClient, type Platform } from './client.js';
import { browserResumeStore } from './resume.js';
import { commonSource, type UploadInput } from './source.js';
import { fetchTransport } from './transport.js';
import { xhrTransport } from './xhr.js';

export * from './common.js';

const browser: Platform<UploadInput> = {
  source: async (input, size) => commonSource(input, size),
  // XMLHttpRequest reports upload progress as bytes move; fetch only once the body is sent.
  transport: (fetch) => (typeof XMLHttpRequest === 'function' ? xhrTransport : fetchTransport(fetch)),
  resumeStore: browserResumeStore,
};

export type Client = CofferClient<UploadInput>;

export function createClient(options: ClientOptions): Client {
  return createCofferClient(options, browser);
}
