/**
 * @coffer/client for Node.js 22+: the browser entry's API, plus uploads from file paths and Node
 * streams, a resume store in a JSON file, and progress that follows streamed bodies.
 */
import { type ClientOptions, type CofferClient, createCofferClient, type Platform } from './client.js';
import { progressBody } from './node/progress-body.js';
import { fileResumeStore } from './node/resume-file.js';
import { type NodeUploadInput, nodeSource } from './node/source.js';
import { fetchTransport } from './transport.js';

export * from './common.js';
export { defaultResumeFile, fileResumeStore } from './node/resume-file.js';
export type { NodeUploadInput } from './node/source.js';

const node: Platform<NodeUploadInput> = {
  source: nodeSource,
  transport: (fetch) => fetchTransport(fetch, progressBody),
  resumeStore: () => fileResumeStore(),
};

export type Client = CofferClient<NodeUploadInput>;

export function createClient(options: ClientOptions): Client {
  return createCofferClient(options, node);
}
