import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { request } from '../../support/coffer.ts';
import { drain } from '../../support/pipeline.ts';
import { sleep } from '../../support/processes.ts';
import { MiB, tusEndpointSuite, tusHeaders } from '../../support/tus-endpoint.ts';

// Uploads expire after 2 s without progress: a PATCH lasting longer shows whether its bytes count.
const { a: coffer, project, created: create } = tusEndpointSuite({ COFFER_MULTIPART_EXPIRY_SECONDS: '2' });

/**
 * A PATCH at offset 0 whose body, `size` bytes, goes out one MiB every `everyMs`, as a slow link sends
 * it; `before(sent)` runs before each MiB. Answers the status and body of its answer.
 */
function slowPatch(url: string, size: number, everyMs: number, before?: (sent: number) => Promise<void>) {
  const sent = httpRequest(url, {
    method: 'PATCH',
    headers: {
      ...tusHeaders(project.key, { 'content-type': 'application/offset+octet-stream', 'upload-offset': '0' }),
      'content-length': String(size),
    },
  });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    sent.on('response', (response) => {
      let body = '';
      response.on('data', (chunk) => {
        body += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode!, body }));
    });
    sent.on('error', reject);
  });
  void (async () => {
    for (let at = 0; at < size && !sent.destroyed; at += MiB) {
      await before?.(at);
      sent.write(Buffer.alloc(Math.min(MiB, size - at), at / MiB));
      await sleep(everyMs);
    }
    sent.end();
  })();
  return answer;
}

describe('tus expiration', () => {
  it('keeps an upload receiving bytes in one long PATCH from expiring, however long it lasts', async () => {
    const size = 20 * MiB;
    const { url, fileId } = await create(size);
    const heads: { status: number; expires: number }[] = [];
    // About 5 s for the whole body, more than twice the expiry; a HEAD from elsewhere meanwhile.
    const answer = await slowPatch(url, size, 250, async (sent) => {
      if (sent % (4 * MiB) !== 0 || sent === 0) return;
      const head = await request(url, 'HEAD', { headers: tusHeaders(project.key) });
      heads.push({ status: head.status, expires: Date.parse(head.headers.get('upload-expires')!) });
    });
    expect(answer.status, answer.body).toBe(204);
    expect(heads.map((head) => head.status)).toEqual([200, 200, 200, 200]);
    // Moved on as the bytes came, not only once they all had.
    expect(heads.at(-1)!.expires).toBeGreaterThan(heads[0]!.expires);
    await drain(coffer.services.pipeline);
    const file = (await project.call('GET', `/files/${fileId}`)).body;
    expect(file.status).toBe('ready');
    expect(file.size_bytes).toBe(size);
    const link = await project.call('GET', `/files/${fileId}/download`);
    const stored = createHash('sha256').update(Buffer.from(await (await fetch(link.body.url)).arrayBuffer()));
    const sent = createHash('sha256');
    for (let at = 0; at < size; at += MiB) sent.update(Buffer.alloc(MiB, at / MiB));
    expect(stored.digest('hex')).toBe(sent.digest('hex'));
  });

  it('answers 410 to a PATCH whose upload is terminated while it writes, as HEAD answers after', async () => {
    const size = 20 * MiB;
    const { url } = await create(size);
    let terminated = 0;
    const answer = await slowPatch(url, size, 50, async (sent) => {
      if (sent === 4 * MiB)
        terminated = (await request(url, 'DELETE', { headers: tusHeaders(project.key) })).status;
    });
    expect(terminated).toBe(204);
    expect(answer.status, answer.body).toBe(410);
    expect((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).status).toBe(410);
  });

  it('answers 410 to a PATCH whose bytes stopped past the expiry, its upload not revived when they resume', async () => {
    const size = 20 * MiB;
    const { url } = await create(size);
    // Nothing for longer than the expiry, then bytes again for seconds before the next part.
    const answer = await slowPatch(url, size, 250, async (sent) => {
      if (sent === MiB) await sleep(3000);
    });
    expect(answer.status, answer.body).toBe(410);
    expect((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).status).toBe(410);
  });
});
