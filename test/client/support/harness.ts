import { createHash, randomBytes } from 'node:crypto';
import { type Client, type ClientOptions, createClient } from '@coffer/client';
import { startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';
import { type HttpProxy, startHttpProxy } from './http-proxy.ts';

export const MIB = 1024 * 1024;

/** Coffer behind a steerable proxy: API calls and presigned object URLs both pass through it. */
export interface Harness {
  coffer: TestCoffer;
  proxy: HttpProxy;
  /** A client of the proxy with fast retries (the project's key unless the options say otherwise). */
  client(project: TestProject, options?: Partial<ClientOptions>): Client;
  close(): Promise<void>;
}

export async function startHarness(env: Record<string, string> = {}): Promise<Harness> {
  const proxy = await startHttpProxy();
  const coffer = await startCoffer({ COFFER_PUBLIC_URL: proxy.url, ...env });
  proxy.target = coffer.url;
  return {
    coffer,
    proxy,
    client: (project, options = {}) =>
      createClient({
        baseUrl: proxy.url,
        ...(options.token ? {} : { apiKey: project.key }),
        retry: { baseDelayMs: 1, maxDelayMs: 5 },
        ...options,
      }),
    async close() {
      await coffer.close();
      await proxy.close();
    },
  };
}

export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Random bytes that cannot be mistaken for another test's. */
export const bytesOf = (size: number) => randomBytes(size);

/** The bytes a download URL serves. */
export async function download(url: string): Promise<Buffer> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`download failed: ${response.status}`);
  return Buffer.from(await response.arrayBuffer());
}

/** The part number of a presigned part PUT (`part=` of its query), undefined for a whole-object PUT. */
export function partOf(url: string): number | undefined {
  const part = new URL(url, 'http://x').searchParams.get('part');
  return part === null ? undefined : Number(part);
}
