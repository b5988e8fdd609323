import { describe, expect, it } from 'vitest';
import { initiate, upload } from '../support/files.ts';
import { coffer, serveFiles } from '../support/files-api.ts';

serveFiles();

describe('download', () => {
  it('hands out a URL that streams the bytes with safe headers and ranges', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project, { filename: 'résumé "final".txt', bytes: '0123456789' })).body;
    const reply = await project.call('GET', `/files/${file.id}/download?ttl=120`);
    expect(reply.status).toBe(200);
    const expiresIn = new Date(reply.body.expires_at).getTime() - Date.now();
    expect(expiresIn).toBeGreaterThan(100_000);
    expect(expiresIn).toBeLessThanOrEqual(120_000);

    const got = await fetch(reply.body.url);
    expect(got.status).toBe(200);
    expect(await got.text()).toBe('0123456789');
    expect(got.headers.get('content-disposition')).toContain('attachment');
    expect(got.headers.get('content-disposition')).toContain(
      "filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.txt",
    );
    // Headers only Coffer adds: the bucket of an S3 store is to be served from an origin of its own.
    if (coffer.services.store.capabilities.servesUrls) {
      expect(got.headers.get('x-content-type-options')).toBe('nosniff');
      expect(got.headers.get('content-security-policy')).toBe('sandbox');
    }
    expect(got.headers.get('accept-ranges')).toBe('bytes');

    const range = await fetch(reply.body.url, { headers: { range: 'bytes=2-4' } });
    expect(range.status).toBe(206);
    expect(range.headers.get('content-range')).toBe('bytes 2-4/10');
    expect(await range.text()).toBe('234');

    const tampered = await fetch(reply.body.url.replace(/(sig|X-Amz-Signature)=[0-9a-f]{4}/, '$1=0000'));
    expect(tampered.status).toBe(403);
  });

  it('uses the project TTL by default and ignores ttl when signed URLs are required', async () => {
    for (const [settings, query, expected] of [
      [{ signed_url_ttl_seconds: 600 }, '', 600],
      [{ signed_url_ttl_seconds: 600, require_signed_urls: true }, '?ttl=60', 600],
      [{ signed_url_ttl_seconds: 600 }, '?ttl=60', 60],
    ] as const) {
      const project = await coffer.newProject(settings);
      const file = (await upload(project)).body;
      const reply = await project.call('GET', `/files/${file.id}/download${query}`);
      const seconds = (new Date(reply.body.expires_at).getTime() - Date.now()) / 1000;
      expect(Math.round(seconds)).toBe(expected);
    }
  });

  it('accepts any number of seconds in range, fractions too', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    const reply = await project.call('GET', `/files/${file.id}/download?ttl=90.5`);
    expect(reply.status).toBe(200);
    const seconds = (new Date(reply.body.expires_at).getTime() - Date.now()) / 1000;
    expect(seconds).toBeGreaterThan(89);
    expect(seconds).toBeLessThanOrEqual(90.5);
  });

  it('ignores even an out-of-range ttl when signed URLs are required', async () => {
    const project = await coffer.newProject({ signed_url_ttl_seconds: 600, require_signed_urls: true });
    const file = (await upload(project)).body;
    for (const ttl of ['59', '86401', '0', '-5']) {
      const reply = await project.call('GET', `/files/${file.id}/download?ttl=${ttl}`);
      expect(reply.status, ttl).toBe(200);
      expect(Math.round((new Date(reply.body.expires_at).getTime() - Date.now()) / 1000)).toBe(600);
    }
  });

  it('validates ttl and refuses files that are not ready', async () => {
    const project = await coffer.newProject();
    const file = (await upload(project)).body;
    for (const ttl of ['59', '86401', '59.9', '1e400']) {
      const reply = await project.call('GET', `/files/${file.id}/download?ttl=${ttl}`);
      expect(reply.status, ttl).toBe(422);
      expect(reply.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'ttl' } });
    }
    const unreadable = await project.call('GET', `/files/${file.id}/download?ttl=soon`);
    expect(unreadable.status).toBe(400);
    expect(unreadable.body.error.code).toBe('BAD_REQUEST');
    const pending = await initiate(project);
    const reply = await project.call('GET', `/files/${pending.file_id}/download`);
    expect(reply.status).toBe(409);
    expect(reply.body.error.code).toBe('INVALID_STATE');
  });
});
