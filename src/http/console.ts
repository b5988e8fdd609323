/**
 * The web console at /console: the static build of packages/console (`npm run build:console`, which
 * `npm install` and `npm test` run first), served with a strict Content-Security-Policy. The page
 * is only HTML, one script and one style sheet from this origin; it talks to the API here and to
 * the object store's presigned URLs, and to nothing else.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';
import type { ObjectStore } from '../infra/storage/object-store.ts';

export const CONSOLE_DIR = fileURLToPath(new URL('../../packages/console/dist/', import.meta.url));

/**
 * The policy of every console response: scripts, styles and fonts of this origin only; no framing.
 * Images may also come from `imageOrigins` (Coffer's public URL, where presigned renditions live).
 */
export function consolePolicy(storeOrigins: readonly string[], imageOrigins: readonly string[] = []): string {
  const reach = ["'self'", ...storeOrigins].join(' ');
  const images = [...new Set(["'self'", ...storeOrigins, ...imageOrigins])].join(' ');
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "font-src 'self'",
    "manifest-src 'self'",
    // Image previews, thumbnails and uploads go to presigned URLs: the object store's, and renditions.
    `img-src ${images}`,
    `connect-src ${reach}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const FIXED_HEADERS = {
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // Nothing of a console URL leaves with a request to another origin (the store, a download).
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

/**
 * The origin of the URLs the store presigns (Coffer's public URL, or the bucket's endpoint):
 * presigning is local to the process, so one is made and read rather than the store's rules
 * for URLs being repeated here.
 */
async function storeOrigin(store: ObjectStore): Promise<string> {
  const url = await store.presignGet('console/origin', {
    expiresAt: new Date(Date.now() + 60_000),
    filename: 'origin',
    contentType: 'application/octet-stream',
  });
  return new URL(url).origin;
}

// Built assets carry a hash of their content in their name; the page itself is asked for again.
const HASHED = /-[A-Z0-9]{8,}\.(?:js|css)$/;

export function consoleRoutes(
  store: ObjectStore,
  options: { publicUrl?: string; dir?: string } = {},
): FastifyPluginAsync {
  const { dir = CONSOLE_DIR } = options;
  const imageOrigins = options.publicUrl ? [new URL(options.publicUrl).origin] : [];
  return async (app) => {
    let policy: Promise<string> | undefined;
    const currentPolicy = () => {
      policy ??= storeOrigin(store).then(
        (origin) => consolePolicy([origin], imageOrigins),
        (error: unknown) => {
          policy = undefined; // asked again by the next page load
          app.log.warn(
            { err: error },
            'console: the object store URL origin is unknown; uploads may be refused',
          );
          return consolePolicy([], imageOrigins);
        },
      );
      return policy;
    };
    app.addHook('onRequest', async (_request, reply) => {
      reply.headers({ ...FIXED_HEADERS, 'content-security-policy': await currentPolicy() });
    });

    if (!existsSync(join(dir, 'index.html'))) {
      app.log.warn(`console: ${dir} holds no build; run npm run build:console`);
      const notBuilt = 'The console is not built: run npm run build:console (npm install does it).';
      for (const url of ['/console', '/console/*'])
        app.get(url, { schema: { hide: true } }, async (_request, reply) =>
          reply.code(503).type('text/plain; charset=utf-8').send(notBuilt),
        );
      return;
    }

    await app.register(fastifyStatic, {
      root: dir,
      prefix: '/console/',
      // One route per built file, listed once here: no path from a request reaches the disk.
      wildcard: false,
      decorateReply: false,
      index: ['index.html'],
      cacheControl: false,
      setHeaders: (reply, path) => {
        reply.header('cache-control', HASHED.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    });
  };
}
