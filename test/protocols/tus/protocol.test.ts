import type * as tus from 'tus-js-client';
import { describe, expect, it } from 'vitest';
import { request } from '../../support/coffer.ts';
import { Exchange } from '../../support/exchange.ts';
import { auth, b64, offsetStream, tusEndpointSuite, tusHeaders, upload } from '../../support/tus-endpoint.ts';

// The tus 1.0 protocol as Coffer's endpoint speaks it: discovery (OPTIONS), its version named on every
// answer, X-HTTP-Method-Override, and the requests it refuses.
const { a, project, created: createdUpload } = tusEndpointSuite();

describe('tus 1.0 endpoint', () => {
  it('answers OPTIONS with its version, extensions and the caller’s size limit', async () => {
    const limited = await a.newProject({ max_file_size_bytes: 1000 });
    const reply = await request(`${a.url}/tus`, 'OPTIONS', { headers: auth(limited.key) });
    expect(reply.status).toBe(204);
    expect(reply.headers.get('tus-version')).toBe('1.0.0');
    expect(reply.headers.get('tus-extension')?.split(',')).toEqual(
      expect.arrayContaining([
        'creation',
        'creation-with-upload',
        'creation-defer-length',
        'termination',
        'expiration',
      ]),
    );
    expect(reply.headers.get('tus-max-size')).toBe('1000');
    const tooLarge = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(limited.key, {
        'upload-length': '1001',
        'upload-metadata': `filename ${b64('a.bin')}`,
      }),
    });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('FILE_TOO_LARGE');
  });

  it('refuses another protocol version with 412', async () => {
    const reply = await request(`${a.url}/tus`, 'POST', {
      headers: { ...auth(project.key), 'tus-resumable': '0.2.2', 'upload-length': '1' },
    });
    expect(reply.status).toBe(412);
    expect(reply.headers.get('tus-version')).toBe('1.0.0');
    // Before any credential is looked at: the request is not one the endpoint can take at all.
    const anonymous = await request(`${a.url}/tus/anything`, 'HEAD', {
      headers: { 'tus-resumable': '2.0.0' },
    });
    expect(anonymous.status).toBe(412);
    expect(anonymous.headers.get('tus-version')).toBe('1.0.0');
    expect(anonymous.headers.get('tus-resumable')).toBe('1.0.0');
  });

  it('names its version on every answer under /tus, the router’s 404s and refused URLs too', async () => {
    const answers = [
      ['HEAD', '/tus/a/b', 404],
      ['GET', '/tus/nothing/here', 404],
      ['GET', '/tus/session_x', 404],
      ['PUT', '/tus', 404],
      ['HEAD', '/tus/%zz', 400],
      ['HEAD', `/tus/${'x'.repeat(200)}`, 400],
    ] as const;
    for (const [method, path, status] of answers) {
      const reply = await request(`${a.url}${path}`, method, { headers: tusHeaders(project.key) });
      expect(reply.status, `${method} ${path}`).toBe(status);
      expect(reply.headers.get('tus-resumable'), `${method} ${path}`).toBe('1.0.0');
    }
    const preflight = await request(`${a.url}/tus/a/b`, 'OPTIONS', {
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'PATCH' },
    });
    expect(preflight.headers.get('tus-resumable')).toBe('1.0.0');
    // Only there: the REST API's answers and a path that merely begins like it do not name it.
    for (const path of ['/tusx', `/v1/projects/${project.id}/nothing`]) {
      const reply = await request(`${a.url}${path}`, 'GET', { headers: tusHeaders(project.key) });
      expect(reply.status, path).toBe(404);
      expect(reply.headers.get('tus-resumable'), path).toBeNull();
    }
  });

  it('refuses with 400, naming the key, an Upload-Metadata value that is not padded standard Base64', async () => {
    const create = (metadata: string) =>
      request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, { 'upload-length': '1', 'upload-metadata': metadata }),
      });
    // Cut, unpadded, padded in the middle, URL-safe, outside the alphabet.
    for (const value of ['Y', 'YQ', 'YQ=', 'Y=Q=', 'YQ-_', 'a.bin']) {
      const reply = await create(`filename ${b64('a.bin')},filetype ${value}`);
      expect(reply.status, value).toBe(400);
      expect(reply.body.error).toMatchObject({
        code: 'BAD_REQUEST',
        message: 'The value of Upload-Metadata key "filetype" is not Base64',
        details: { field: 'Upload-Metadata' },
      });
    }
    // Not taken for an empty filename.
    expect((await create('filename Y')).body.error.message).toBe(
      'The value of Upload-Metadata key "filename" is not Base64',
    );
    // A key without a value is taken; a key twice is not.
    expect((await create(`filename ${b64('a.bin')},flag`)).status).toBe(201);
    expect((await create(`filename ${b64('a.bin')},filename ${b64('b.bin')}`)).status).toBe(400);
  });

  it('refuses with 415, in words that fit POST and PATCH, a body of another Content-Type', async () => {
    const headers = { 'upload-length': '2', 'upload-metadata': `filename ${b64('t.txt')}` };
    const created = await request(`${a.url}/tus`, 'POST', { headers: tusHeaders(project.key, headers) });
    const wrongType = { 'content-type': 'text/plain', 'upload-offset': '0' };
    const replies = [
      await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(project.key, { ...headers, ...wrongType }),
        body: 'hi',
      }),
      await request(created.headers.get('location')!, 'PATCH', {
        headers: tusHeaders(project.key, wrongType),
        body: 'hi',
      }),
    ];
    for (const reply of replies) {
      expect(reply.status).toBe(415);
      expect(reply.body.error.message).toBe(
        'The body of a tus request is Content-Type: application/offset+octet-stream',
      );
    }
  });

  it('answers a PATCH waiting for 100 Continue that it refuses with the refusal alone, its body never asked for', async () => {
    const created = await request(`${a.url}/tus`, 'POST', {
      headers: tusHeaders(project.key, {
        'upload-length': '1000',
        'upload-metadata': `filename ${b64('e.bin')}`,
      }),
    });
    const path = new URL(created.headers.get('location')!).pathname;
    const patch = new Exchange(a.url, 'PATCH', path, {
      ...tusHeaders(project.key, { ...offsetStream, 'upload-offset': '5' }),
      'content-length': '995',
      expect: '100-continue',
    });
    const answer = await patch.next();
    patch.close();
    expect(answer.status).toBe(409);
  });

  it('takes PATCH and DELETE as POST with X-HTTP-Method-Override', async () => {
    const { url } = await createdUpload(20);
    const patched = await request(url, 'POST', {
      headers: tusHeaders(project.key, {
        'x-http-method-override': 'PATCH',
        'upload-offset': '0',
        'content-type': 'application/offset+octet-stream',
      }),
      body: Buffer.alloc(10, 7),
    });
    expect(patched.status).toBe(204);
    expect(patched.headers.get('upload-offset')).toBe('10');
    const deleted = await request(url, 'POST', {
      headers: tusHeaders(project.key, { 'x-http-method-override': 'DELETE' }),
    });
    expect(deleted.status).toBe(204);
    expect((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).status).toBe(410);
  });

  it('takes X-HTTP-Method-Override on /tus as on an upload, as tusd does: the method named, or its 404', async () => {
    const fresh = await a.newProject({ max_file_size_bytes: 1000 });
    const creation = {
      'upload-length': '5',
      'upload-metadata': `filename ${b64('v.bin')}`,
    };
    const asPost = (path: string, headers: Record<string, string>) =>
      request(`${a.url}${path}`, 'POST', { headers });
    // OPTIONS: tus's discovery, which needs neither version nor credential (the credential's limit if sent).
    for (const path of ['/tus', '/tus/session_x']) {
      const options = await asPost(path, { 'x-http-method-override': 'options' });
      expect(options.status, path).toBe(204);
      expect(options.headers.get('tus-version'), path).toBe('1.0.0');
      expect(options.headers.get('tus-extension'), path).toContain('creation');
      expect(options.headers.get('tus-resumable'), path).toBe('1.0.0');
    }
    const limited = await asPost('/tus', { ...auth(fresh.key), 'x-http-method-override': 'OPTIONS' });
    expect(limited.headers.get('tus-max-size')).toBe('1000');
    // A method /tus has no route for is answered as that method is: 404, and nothing is created.
    for (const method of ['PATCH', 'HEAD', 'DELETE', 'GET']) {
      const refused = await asPost(
        '/tus',
        tusHeaders(fresh.key, { ...creation, 'x-http-method-override': method }),
      );
      expect(refused.status, method).toBe(404);
      expect(refused.headers.get('tus-resumable'), method).toBe('1.0.0');
      expect(refused.headers.get('location'), method).toBeNull();
      expect(refused.body.error.message, method).toBe(`No route for ${method} /tus`);
    }
    // One that names no method (an empty one too) is refused, not taken for a creation.
    for (const value of ['PTACH', '']) {
      const unknown = await asPost(
        '/tus',
        tusHeaders(fresh.key, { ...creation, 'x-http-method-override': value }),
      );
      expect(unknown.status, value).toBe(400);
      expect(unknown.body.error.details, value).toEqual({ field: 'X-HTTP-Method-Override' });
    }
    const files = await a.services.db.query('SELECT id FROM files WHERE project_id = $1', [fresh.id]);
    expect(files).toEqual([]);
    // POST named as itself is a creation; HEAD on an upload answers its offset.
    const created = await asPost(
      '/tus',
      tusHeaders(fresh.key, { ...creation, 'x-http-method-override': 'POST' }),
    );
    expect(created.status).toBe(201);
    const url = new URL(created.headers.get('location')!).pathname;
    const head = await asPost(url, tusHeaders(fresh.key, { 'x-http-method-override': 'HEAD' }));
    expect(head.status).toBe(200);
    expect(head.headers.get('upload-offset')).toBe('0');
    expect(head.headers.get('upload-length')).toBe('5');
    expect((await asPost(url, tusHeaders(fresh.key))).status).toBe(400);
  });

  it('takes X-HTTP-Method-Override as the method of a request of any method, not of POST only', async () => {
    const { url } = await createdUpload(20);
    // A PUT standing in for PATCH, a GET for HEAD: neither method has a route of its own.
    const patched = await request(url, 'PUT', {
      headers: tusHeaders(project.key, {
        ...offsetStream,
        'upload-offset': '0',
        'x-http-method-override': 'PATCH',
      }),
      body: Buffer.alloc(8, 1),
    });
    expect(patched.status).toBe(204);
    expect(patched.headers.get('upload-offset')).toBe('8');
    const head = await request(url, 'GET', {
      headers: tusHeaders(project.key, { 'x-http-method-override': 'HEAD' }),
    });
    expect(head.status).toBe(200);
    expect(head.headers.get('upload-offset')).toBe('8');
    expect(head.headers.get('upload-length')).toBe('20');
    // A PATCH naming no method is refused, its bytes not taken.
    const unknown = await request(url, 'PATCH', {
      headers: tusHeaders(project.key, {
        ...offsetStream,
        'upload-offset': '8',
        'x-http-method-override': 'PTACH',
      }),
      body: Buffer.alloc(4, 2),
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.details).toEqual({ field: 'X-HTTP-Method-Override' });
    // A HEAD standing in for DELETE terminates the upload.
    const deleted = await request(url, 'HEAD', {
      headers: tusHeaders(project.key, { 'x-http-method-override': 'DELETE' }),
    });
    expect(deleted.status).toBe(204);
    expect((await request(url, 'HEAD', { headers: tusHeaders(project.key) })).status).toBe(410);
  });

  it('refuses with 400, creating nothing, an upload of the concatenation extension it does not serve', async () => {
    const fresh = await a.newProject();
    // tus-js-client's parallelUploads: partial uploads, then a final one naming them.
    const parallel = upload(Buffer.from('sent in two partial uploads'), {
      endpoint: `${a.url}/tus`,
      headers: auth(fresh.key),
      parallelUploads: 2,
      metadata: { filename: 'whole.txt' },
      metadataForPartialUploads: { filename: 'part.txt' },
    });
    const error = (await parallel.catch((caught: unknown) => caught)) as tus.DetailedError;
    expect(error.originalResponse?.getStatus()).toBe(400);
    for (const concat of ['partial', 'final;/tus/session_a /tus/session_b']) {
      const reply = await request(`${a.url}/tus`, 'POST', {
        headers: tusHeaders(fresh.key, {
          'upload-length': '5',
          'upload-metadata': `filename ${b64('c.txt')}`,
          'upload-concat': concat,
        }),
      });
      expect(reply.status, concat).toBe(400);
      expect(reply.body.error.details, concat).toEqual({ field: 'Upload-Concat' });
      expect(reply.headers.get('location'), concat).toBeNull();
    }
    const files = await a.services.db.query('SELECT id FROM files WHERE project_id = $1', [fresh.id]);
    expect(files).toEqual([]);
  });
});
