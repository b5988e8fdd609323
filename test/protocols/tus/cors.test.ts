import { describe, expect, it } from 'vitest';
import { b64, tusEndpointSuite, tusHeaders } from '../../support/tus-endpoint.ts';

// The tus endpoint from a browser: a preflight of /tus allows the tus request headers, and its answers
// expose the tus headers.
const { a, project } = tusEndpointSuite();

describe('tus from a browser (CORS)', () => {
  const origin = 'https://app.example.com';
  const list = (value: string | null) => (value ?? '').split(',').map((part) => part.trim().toLowerCase());

  it('allows the tus request headers in a preflight of /tus, and only there', async () => {
    const preflight = (path: string) =>
      fetch(`${a.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'PATCH',
          'access-control-request-headers': 'tus-resumable,upload-offset,content-type,authorization',
        },
      });
    const tus = await preflight('/tus/session_x');
    expect(tus.status).toBe(204);
    expect(list(tus.headers.get('access-control-allow-headers'))).toEqual(
      expect.arrayContaining([
        'tus-resumable',
        'upload-offset',
        'upload-length',
        'upload-metadata',
        'upload-defer-length',
      ]),
    );
    // The path decides, whatever query follows it.
    for (const path of ['/tus?x=1', '/tus/session_x?y=2']) {
      expect(list((await preflight(path)).headers.get('access-control-allow-headers'))).toContain(
        'tus-resumable',
      );
    }
    const api = await preflight(`/v1/projects/${project.id}/files`);
    expect(list(api.headers.get('access-control-allow-headers'))).not.toContain('tus-resumable');
  });

  it('allows in a preflight every header a browser’s tus client sends, as tusd’s default list does', async () => {
    const sent = [
      'authorization',
      'content-type',
      'tus-resumable',
      'upload-length',
      'upload-offset',
      'upload-metadata',
      'upload-defer-length',
      'upload-concat',
      'x-http-method-override',
      'x-requested-with',
      'x-request-id',
    ];
    for (const path of ['/tus', '/tus/session_x']) {
      const preflight = await fetch(`${a.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': sent.join(','),
        },
      });
      expect(preflight.status, path).toBe(204);
      const allowed = list(preflight.headers.get('access-control-allow-headers'));
      expect(allowed, path).toEqual(expect.arrayContaining(sent));
      // Each once, whatever its spelling (the API's X-Request-Id is tus-js-client's X-Request-ID).
      expect(allowed.length, path).toBe(new Set(allowed).size);
    }
  });

  it('answers a preflight as one though it carries X-HTTP-Method-Override', async () => {
    const preflight = await fetch(`${a.url}/tus/session_x`, {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'PATCH',
        'access-control-request-headers': 'tus-resumable,upload-offset',
        'x-http-method-override': 'DELETE',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-methods')).toContain('PATCH');
    expect(list(preflight.headers.get('access-control-allow-headers'))).toContain('upload-offset');
  });

  it('exposes the tus answer headers and answers tus’s own OPTIONS', async () => {
    const options = await fetch(`${a.url}/tus`, { method: 'OPTIONS', headers: { origin } });
    expect(options.status).toBe(204);
    expect(options.headers.get('tus-version')).toBe('1.0.0');
    const created = await fetch(`${a.url}/tus`, {
      method: 'POST',
      headers: {
        ...tusHeaders(project.key, { 'upload-length': '5', 'upload-metadata': `filename ${b64('c.txt')}` }),
        origin,
      },
    });
    expect(created.status).toBe(201);
    expect(list(created.headers.get('access-control-expose-headers'))).toEqual(
      expect.arrayContaining([
        'location',
        'upload-offset',
        'upload-expires',
        'tus-resumable',
        'x-coffer-file-id',
      ]),
    );
  });
});
