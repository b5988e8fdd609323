import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { storage } from '../../support/backends.ts';
import { request } from '../../support/coffer.ts';
import { sleep } from '../../support/processes.ts';
import { MiB, tusEndpointSuite } from '../../support/tus-endpoint.ts';

// A PATCH from a slow link, through to an S3 backend that Coffer gives 1 s to answer: its bytes go on
// to the store as they come, for longer than that, without the store ever being silent that long.
const { a: coffer, project } = tusEndpointSuite({ COFFER_S3_TIMEOUT_MS: '1000' });

describe.runIf(storage === 's3')('tus over a slow link', () => {
  it('stores a part whose bytes take longer to arrive than the store is given to answer', async () => {
    const size = 6 * MiB;
    const created = await request(`${coffer.url}/tus`, 'POST', {
      headers: {
        'tus-resumable': '1.0.0',
        authorization: `Bearer ${project.key}`,
        'upload-length': String(size),
        'upload-metadata': `filename ${Buffer.from('slow.bin').toString('base64')}`,
      },
    });
    expect(created.status).toBe(201);
    const patch = httpRequest(created.headers.get('location')!, {
      method: 'PATCH',
      headers: {
        'tus-resumable': '1.0.0',
        authorization: `Bearer ${project.key}`,
        'content-type': 'application/offset+octet-stream',
        'upload-offset': '0',
        'content-length': String(size),
      },
    });
    const answer = new Promise<number>((resolve, reject) => {
      patch.on('response', (response) => {
        response.resume();
        resolve(response.statusCode!);
      });
      patch.on('error', reject);
    });
    // About 3 s for the whole body, a MiB every 500 ms.
    for (let at = 0; at < size; at += MiB) {
      patch.write(Buffer.alloc(MiB, at / MiB));
      await sleep(500);
    }
    patch.end();
    expect(await answer).toBe(204);
  });
});
