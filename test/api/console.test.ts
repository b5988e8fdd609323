/**
 * The console's pages over plain HTTP: a strict Content-Security-Policy (scripts and styles of
 * this origin only, no inline script, no framing) on every file of it, nothing in the HTML that
 * runs inline, a bundle that writes no HTML, and a clear answer where it was not built.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR, consoleRoutes } from '../../src/http/console.ts';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';

/** The gzipped script may grow to this: the console and the SDK's browser entry together. */
const BUNDLE_LIMIT = 40 * 1024;

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(async () => coffer?.close());

/** The directives of a Content-Security-Policy header, by name. */
function directives(header: string | null): Record<string, string[]> {
  expect(header).toBeTruthy();
  return Object.fromEntries(
    header!
      .split(';')
      .map((part) => part.trim().split(/\s+/))
      .filter(([name]) => name)
      .map(([name, ...values]) => [name, values]),
  );
}

/** What the store's presigned URLs start with: Coffer's public URL, or the bucket's endpoint. */
async function storeOrigin(): Promise<string> {
  const url = await coffer.services.store.presignGet('probe/origin', {
    expiresAt: new Date(Date.now() + 60_000),
    filename: 'x',
    contentType: 'application/octet-stream',
  });
  return new URL(url).origin;
}

function expectConsoleHeaders(headers: Headers, policy: Record<string, string[]>) {
  expect(headers.get('x-frame-options')).toBe('DENY');
  expect(headers.get('x-content-type-options')).toBe('nosniff');
  expect(headers.get('referrer-policy')).toBe('no-referrer');
  expect(directives(headers.get('content-security-policy'))).toEqual(policy);
}

describe('the console at /console', () => {
  let policy: Record<string, string[]>;
  beforeAll(async () => {
    const store = await storeOrigin();
    const reach = store === new URL(coffer.url).origin ? ["'self'"] : ["'self'", store];
    policy = {
      'default-src': ["'none'"],
      'script-src': ["'self'"],
      'style-src': ["'self'"],
      'font-src': ["'self'"],
      'manifest-src': ["'self'"],
      // Presigned renditions are Coffer's own URLs, wherever the store's are.
      'img-src': [...new Set(["'self'", ...reach.slice(1), new URL(coffer.config.publicUrl).origin])],
      'connect-src': ["'self'", ...reach.slice(1)],
      'base-uri': ["'none'"],
      'form-action': ["'none'"],
      'frame-ancestors': ["'none'"],
    };
  });

  it('serves the page with a strict policy, and nothing in it runs inline', async () => {
    for (const path of ['/console', '/console/']) {
      const response = await fetch(`${coffer.url}${path}`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/html/);
      expect(response.headers.get('cache-control')).toBe('no-cache');
      expectConsoleHeaders(response.headers, policy);
      const html = await response.text();
      const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
      expect(scripts).toHaveLength(1);
      for (const [, attributes, body] of scripts) {
        expect(attributes).toMatch(/\bsrc="\/console\/[^"]+\.js"/);
        expect(body).toBe('');
      }
      expect(html).not.toMatch(/\son[a-z]+\s*=/i); // no inline event handlers
      expect(html).not.toMatch(/\sstyle\s*=/i);
      expect(html).not.toMatch(/<style\b/i);
      expect(html).not.toMatch(/https?:\/\//); // nothing from another origin
    }
  });

  it('serves every file the page loads from this origin, with the same headers, cached by content', async () => {
    const html = await (await fetch(`${coffer.url}/console`)).text();
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/[^"]+)"/g)].map(([, path]) => path!);
    expect(assets).toEqual([
      expect.stringMatching(/^\/console\/icon\.svg$/),
      expect.stringMatching(/^\/console\/styles-[A-Z0-9]+\.css$/),
      expect.stringMatching(/^\/console\/console-[A-Z0-9]+\.js$/),
    ]);
    const types = { svg: /^image\/svg\+xml/, css: /^text\/css/, js: /^(?:text|application)\/javascript/ };
    for (const path of assets) {
      const response = await fetch(`${coffer.url}${path}`);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-type')).toMatch(
        types[path.split('.').pop() as keyof typeof types],
      );
      expectConsoleHeaders(response.headers, policy);
      if (!path.endsWith('.svg'))
        expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      await response.arrayBuffer();
    }
  });

  it('answers 404 for a file it does not have, and never reads outside its directory', async () => {
    for (const path of [
      '/console/nothing.js',
      '/console/..%2f..%2fpackage.json',
      '/console/../package.json',
    ]) {
      const response = await fetch(`${coffer.url}${path}`);
      expect(response.status, path).toBe(404);
      expect(await response.text()).not.toContain('"name": "coffer"');
    }
  });

  it('ships a script that writes no HTML, within its size budget', () => {
    const script = readdirSync(CONSOLE_DIR).find((name) => /^console-.*\.js$/.test(name))!;
    const code = readFileSync(join(CONSOLE_DIR, script));
    const text = code.toString('utf8');
    // Text reaches the page as text nodes only: no HTML parser is ever handed a string.
    expect(text).not.toMatch(
      /\.(?:innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|createContextualFragment|parseFromString|\beval\(|new Function\(/,
    );
    const gzipped = gzipSync(code, { level: 9 }).length;
    process.stdout.write(`console bundle: ${code.length} bytes minified, ${gzipped} bytes gzipped\n`);
    expect(gzipped).toBeLessThanOrEqual(BUNDLE_LIMIT);
  });

  it('is left out of the OpenAPI document', async () => {
    const document = (await coffer.call('GET', '/openapi.json')).body;
    expect(Object.keys(document.paths).filter((path) => path.startsWith('/console'))).toEqual([]);
  });
});

it('says how to build the console where it was not built', async () => {
  const app = Fastify();
  await app.register(
    consoleRoutes(coffer.services.store, { dir: mkdtempSync(join(tmpdir(), 'coffer-console-')) }),
  );
  const reply = await app.inject({ method: 'GET', url: '/console' });
  expect(reply.statusCode).toBe(503);
  expect(reply.body).toContain('npm run build:console');
  expect(reply.headers['x-frame-options']).toBe('DENY');
  await app.close();
});
