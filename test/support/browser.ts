import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type CORSRule,
  DeleteBucketCorsCommand,
  GetBucketCorsCommand,
  PutBucketCorsCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { build } from 'esbuild';
import { type Browser, chromium, type Page, type Request, type Route } from 'playwright-core';
import { s3TestSettings } from './backends.ts';

const DEBIAN_CHROMIUM = '/usr/bin/chromium';

/**
 * The Chromium to drive: COFFER_TEST_CHROMIUM (CI sets it, see .ci/chromium.sh), else Debian's when
 * installed, else undefined. A COFFER_TEST_CHROMIUM that names nothing is an error, not a skip.
 */
export function findChromium(): string | undefined {
  const wanted = process.env.COFFER_TEST_CHROMIUM;
  if (wanted) {
    if (!existsSync(wanted)) throw new Error(`COFFER_TEST_CHROMIUM=${wanted} does not exist`);
    return wanted;
  }
  return existsSync(DEBIAN_CHROMIUM) ? DEBIAN_CHROMIUM : undefined;
}

/** The Chromium for a test file, or undefined after saying on stderr that `test` does not run. */
export function chromiumFor(test: string): string | undefined {
  const found = findChromium();
  if (!found) {
    process.stderr.write(
      `${test}: NOT RUN: no Chromium (set COFFER_TEST_CHROMIUM, or install Debian's chromium: bash .ci/chromium.sh)\n`,
    );
  }
  return found;
}

/** Headless, as root (hence no sandbox), with nothing talking to the network on its own. */
export function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** An ES module bundle of `entry` for browsers: packages resolve to their browser entries. */
export async function bundleForBrowser(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

type Call<F> = F extends (...args: infer A) => infer R ? { args: A; result: Awaited<R> } : never;

/**
 * Calls, for a test page that puts its API on `globalThis[global]`, one of its functions through
 * `page.evaluate`; the function's errors come back as rejections.
 */
export function pageCaller<Api>(global: string) {
  return <K extends keyof Api & string>(
    page: Page,
    name: K,
    ...args: Call<Api[K]>['args']
  ): Promise<Call<Api[K]>['result']> =>
    page.evaluate(
      ([global, name, args]) => {
        const api = (
          globalThis as unknown as Record<string, Record<string, (...values: unknown[]) => unknown>>
        )[global]!;
        return api[name]!(...args);
      },
      [global, name, args as unknown[]] as const,
    ) as Promise<Call<Api[K]>['result']>;
}

/**
 * A user leaving mid-upload: `start` begins a page's call, the first request `hold` picks among
 * those `matches` is held, and the page is reloaded under it (its API back on `globalThis[global]`);
 * then the held request fails. Answers how the interrupted call ended.
 */
export async function reloadWhileHeld(
  page: Page,
  options: {
    global: string;
    matches: (url: URL) => boolean;
    hold: (request: Request) => boolean;
    start: () => Promise<unknown>;
  },
): Promise<string> {
  let held: (route: Route) => void;
  const holding = new Promise<Route>((resolve) => {
    held = resolve;
  });
  await page.route(options.matches, (route) =>
    options.hold(route.request()) ? held(route) : route.continue(),
  );
  const interrupted = options.start().then(
    () => 'finished',
    (error: Error) => error.message,
  );
  const route = await holding;
  await page.reload();
  await page.waitForFunction((global) => global in globalThis, options.global);
  const ended = await interrupted;
  await page.unrouteAll({ behavior: 'ignoreErrors' });
  await route.abort().catch(() => {});
  return ended;
}

export type PageHandler = (
  request: IncomingMessage,
  body: Buffer,
) => Promise<{ status: number; json: unknown }>;

export interface PageServer {
  /** http://127.0.0.1:<port>, an origin of its own (another port than Coffer's). */
  origin: string;
  close(): Promise<void>;
}

/**
 * A tiny web server for a test page: `/` is an HTML page that loads `/page.js` (the script as a
 * module), and each of `handlers` answers JSON on its path.
 */
export async function servePage(
  script: string,
  handlers: Record<string, PageHandler> = {},
): Promise<PageServer> {
  const html =
    '<!doctype html><html><head><meta charset="utf-8"><title>Coffer browser test</title>' +
    '<script type="module" src="/page.js"></script></head><body></body></html>';
  const send = (response: ServerResponse, status: number, type: string, body: string) => {
    response.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
    response.end(body);
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = new URL(request.url ?? '/', 'http://page').pathname;
      const handler = handlers[path];
      if (path === '/') return send(response, 200, 'text/html; charset=utf-8', html);
      if (path === '/page.js') return send(response, 200, 'text/javascript; charset=utf-8', script);
      if (!handler) return send(response, 404, 'text/plain', 'not found');
      handler(request, Buffer.concat(chunks)).then(
        ({ status, json }) => send(response, status, 'application/json', JSON.stringify(json)),
        (error: unknown) => send(response, 500, 'application/json', JSON.stringify({ error: String(error) })),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * On S3 the object URLs are the bucket's: it gets the CORS rule the README tells operators to set,
 * for a page's origin. The bucket is shared by test files running at once, so each adds its own
 * rule (by ID, checked to be there after writing) and removes only that one at the end.
 */
export async function allowBucketCors(origin: string): Promise<() => Promise<void>> {
  const s3 = s3TestSettings()!;
  const client = new S3Client({
    endpoint: s3.endpoint,
    region: s3.region,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    forcePathStyle: true,
  });
  const Bucket = s3.bucket;
  const ID = `coffer-test ${origin}`;
  const rules = async (): Promise<CORSRule[]> => {
    try {
      return (await client.send(new GetBucketCorsCommand({ Bucket }))).CORSRules ?? [];
    } catch (error) {
      if ((error as Error).name === 'NoSuchCORSConfiguration') return [];
      throw error;
    }
  };
  const write = async (CORSRules: CORSRule[]) => {
    if (CORSRules.length)
      await client.send(new PutBucketCorsCommand({ Bucket, CORSConfiguration: { CORSRules } }));
    else await client.send(new DeleteBucketCorsCommand({ Bucket }));
  };
  const rule: CORSRule = {
    ID,
    AllowedOrigins: [origin],
    AllowedMethods: ['GET', 'PUT', 'HEAD'],
    AllowedHeaders: ['*'],
    ExposeHeaders: ['ETag'],
    MaxAgeSeconds: 3600,
  };
  // Another file may write the rules between this read and write: written again until it holds.
  for (let attempt = 0; !(await rules()).some((each) => each.ID === ID); attempt++) {
    if (attempt === 5) throw new Error(`the bucket's CORS rule for ${origin} does not stay`);
    await write([...(await rules()).filter((each) => each.ID !== ID), rule]);
  }
  return async () => {
    await write((await rules()).filter((each) => each.ID !== ID));
    client.destroy();
  };
}
