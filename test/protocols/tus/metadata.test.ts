import * as tus from 'tus-js-client';
import { describe, expect, it } from 'vitest';
import { request } from '../../support/coffer.ts';
import { b64, tusEndpointSuite } from '../../support/tus-endpoint.ts';

/** Bytes that are no UTF-8: Latin-1's "é", then a lone continuation byte. */
const NOT_UTF8 = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x80, 0x2e, 0x74, 0x78, 0x74]);

const { a: coffer, project } = tusEndpointSuite();

const create = (metadata: string) =>
  request(`${coffer.url}/tus`, 'POST', {
    headers: {
      'tus-resumable': '1.0.0',
      authorization: `Bearer ${project.key}`,
      'upload-length': '1',
      'upload-metadata': metadata,
    },
  });

describe('tus Upload-Metadata', () => {
  it('takes a file name of any script, sent as tus-js-client sends it (Base64 of UTF-8)', async () => {
    const filename = 'été 🎉 файл.txt';
    const url = await new Promise<string>((resolve, reject) => {
      const upload: tus.Upload = new tus.Upload(Buffer.from('x'), {
        endpoint: `${coffer.url}/tus`,
        headers: { authorization: `Bearer ${project.key}` },
        metadata: { filename, filetype: 'text/plain' },
        onSuccess: () => resolve(upload.url!),
        onError: reject,
      });
      upload.start();
    });
    const head = await request(url, 'HEAD', {
      headers: { 'tus-resumable': '1.0.0', authorization: `Bearer ${project.key}` },
    });
    const file = await project.call('GET', `/files/${head.headers.get('x-coffer-file-id')}`);
    expect(file.body.filename).toBe(filename);
  });

  it('refuses with 400, naming the key, a value Coffer reads that is not UTF-8, rather than change it', async () => {
    for (const key of ['filename', 'filetype', 'folder_id', 'tags', 'metadata']) {
      const others = key === 'filename' ? '' : `filename ${b64('a.txt')},`;
      const reply = await create(`${others}${key} ${b64(NOT_UTF8)}`);
      expect(reply.status, key).toBe(400);
      expect(reply.body.error, key).toMatchObject({
        code: 'BAD_REQUEST',
        message: `The value of Upload-Metadata key "${key}" is not UTF-8 text`,
        details: { field: 'Upload-Metadata' },
      });
      expect(reply.headers.get('tus-resumable'), key).toBe('1.0.0');
    }
    // A key of the client's own is not read: any bytes, as tus allows them.
    expect((await create(`filename ${b64('a.txt')},checksum ${b64(NOT_UTF8)}`)).status).toBe(201);
  });
});
