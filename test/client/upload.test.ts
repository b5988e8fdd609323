import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { CofferError, type Progress } from '@coffer/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestProject } from '../support/coffer.ts';
import {
  bytesOf,
  download,
  type Harness,
  MIB,
  OBJECTS,
  partOf,
  sha256,
  startHarness,
} from './support/harness.ts';
import { requestsTo } from './support/http-proxy.ts';

let harness: Harness;
let project: TestProject;
let dir: string;

beforeAll(async () => {
  harness = await startHarness();
  project = await harness.coffer.newProject();
  dir = mkdtempSync(join(tmpdir(), 'coffer-client-'));
});
afterAll(async () => {
  await harness?.close();
  rmSync(dir, { recursive: true, force: true });
});

const objectPuts = () => requestsTo(harness.proxy, 'PUT', OBJECTS);

async function expectStored(fileId: string, bytes: Uint8Array) {
  const client = harness.client(project);
  const { url } = await client.files.downloadUrl(project.id, fileId);
  expect(sha256(await download(url))).toBe(sha256(bytes));
}

describe('single upload', () => {
  it('uploads a Buffer: initiate, PUT with exactly the declared type and length, confirm', async () => {
    const bytes = bytesOf(1000);
    const before = objectPuts().length;
    const file = await harness.client(project).upload(project.id, bytes, {
      filename: 'data.csv',
      contentType: 'text/csv',
      tags: ['sdk'],
      metadata: { origin: 'test' },
    });
    expect(file).toMatchObject({
      filename: 'data.csv',
      content_type: 'text/csv',
      size_bytes: 1000,
      status: 'ready',
      tags: ['sdk'],
      metadata: { origin: 'test' },
    });
    const puts = objectPuts().slice(before);
    expect(puts).toHaveLength(1);
    expect(puts[0]!.headers['content-type']).toBe('text/csv');
    expect(puts[0]!.headers['content-length']).toBe('1000');
    expect(puts[0]!.headers.authorization).toBeUndefined();
    await expectStored(file.id, bytes);
  });

  it('uploads a file path, taking its name and type from the path', async () => {
    const path = join(dir, 'notes.txt');
    const text = Buffer.from('some notes\n'.repeat(100));
    writeFileSync(path, text);
    const file = await harness.client(project).upload(project.id, path);
    expect(file).toMatchObject({
      filename: 'notes.txt',
      content_type: 'text/plain',
      size_bytes: text.length,
    });
    // No charset added to a text type: the URL is signed for the type as declared.
    expect(objectPuts().at(-1)!.headers['content-type']).toBe('text/plain');
    await expectStored(file.id, text);
  });

  it('uploads a Node stream of a given size, and an fs stream named after its file', async () => {
    const bytes = bytesOf(300_000);
    const client = harness.client(project);
    const chunks = [bytes.subarray(0, 1000), bytes.subarray(1000, 200_000), bytes.subarray(200_000)];
    const file = await client.upload(project.id, Readable.from(chunks), {
      size: bytes.length,
      filename: 'stream.bin',
    });
    expect(file).toMatchObject({ filename: 'stream.bin', size_bytes: bytes.length, status: 'ready' });
    await expectStored(file.id, bytes);

    const path = join(dir, 'photo.png');
    writeFileSync(path, bytes);
    const fromFs = await client.upload(project.id, createReadStream(path), { size: bytes.length });
    expect(fromFs).toMatchObject({ filename: 'photo.png', content_type: 'image/png' });
  });

  it('uploads a Blob and a web ReadableStream', async () => {
    const client = harness.client(project);
    const blob = new Blob([bytesOf(5000)], { type: 'application/pdf' });
    const file = await client.upload(project.id, blob, { filename: 'doc.pdf' });
    expect(file).toMatchObject({ content_type: 'application/pdf', size_bytes: 5000 });

    const bytes = bytesOf(70_000);
    const stream = new Blob([bytes]).stream();
    const streamed = await client.upload(project.id, stream, { size: bytes.length, filename: 'web.bin' });
    expect(streamed).toMatchObject({ size_bytes: bytes.length, content_type: 'application/octet-stream' });
    await expectStored(streamed.id, bytes);
  });

  it('refuses a stream without size, and one that is shorter or longer than its size', async () => {
    const client = harness.client(project);
    const fails = (promise: Promise<unknown>) =>
      expect(promise).rejects.toMatchObject({ name: 'CofferError', code: 'INVALID_INPUT', status: 0 });
    await fails(client.upload(project.id, Readable.from([Buffer.from('abc')])));
    await fails(client.upload(project.id, Readable.from([Buffer.from('abc')]), { size: 4 }));
    await fails(client.upload(project.id, Readable.from([Buffer.from('abcde')]), { size: 4 }));
    await fails(client.upload(project.id, Buffer.from('abc'), { size: 4 }));
    await expect(client.upload(project.id, join(dir, 'missing.txt'))).rejects.toBeInstanceOf(CofferError);
  });
});

describe('multipart upload', () => {
  it('sends the parts in parallel with their sizes, reports progress up to the total, completes in order', async () => {
    // Part 2 is refused once after all its bytes were sent: its retry starts again from 0.
    let failed = false;
    harness.proxy.intercept = (request) => {
      if (request.method !== 'PUT' || partOf(request.url) !== 2 || failed) return undefined;
      failed = true;
      return { status: 503 };
    };
    const size = 12 * MIB + 123;
    const bytes = bytesOf(size);
    const path = join(dir, 'video.mp4');
    writeFileSync(path, bytes);
    const events: Progress[] = [];
    const seenBefore = harness.proxy.seen.length;
    harness.proxy.putDelayMs = 150;
    harness.proxy.maxPutsInFlight = 0;
    try {
      const file = await harness.client(project).upload(project.id, path, {
        partSize: 5 * MIB,
        multipartThreshold: 5 * MIB,
        concurrency: 3,
        onProgress: (progress) => events.push(progress),
      });
      expect(file).toMatchObject({ filename: 'video.mp4', content_type: 'video/mp4', size_bytes: size });
      expect(file.status).toBe('ready');
    } finally {
      harness.proxy.putDelayMs = 0;
      harness.proxy.intercept = undefined;
    }
    const seen = harness.proxy.seen.slice(seenBefore);
    const partUrls = seen.filter((r) => r.url.includes('/part-url?'));
    expect(
      partUrls
        .map((r) => Object.fromEntries(new URL(r.url, 'http://x').searchParams))
        .sort((a, b) => +a.part! - +b.part!),
    ).toEqual([
      { part: '1', size: String(5 * MIB) },
      { part: '2', size: String(5 * MIB) },
      { part: '3', size: String(2 * MIB + 123) },
    ]);
    const puts = seen.filter((r) => r.method === 'PUT');
    expect(puts.map((r) => partOf(r.url)).sort()).toEqual([1, 2, 2, 3]);
    expect(harness.proxy.maxPutsInFlight).toBeGreaterThanOrEqual(2);
    expect(seen.filter((r) => r.url.endsWith('/complete'))).toHaveLength(1);

    // Progress follows the bytes (many events, not one per part), never goes down, and ends at the total.
    expect(events.length).toBeGreaterThan(10);
    expect(events.every((event) => event.total === size)).toBe(true);
    for (let index = 1; index < events.length; index++) {
      expect(events[index]!.loaded).toBeGreaterThanOrEqual(events[index - 1]!.loaded);
    }
    expect(events.at(-1)!.loaded).toBe(size);
  });

  it('reads a stream in order for its parts', async () => {
    const size = 11 * MIB;
    const bytes = bytesOf(size);
    const chunks = Array.from({ length: 11 }, (_, index) => bytes.subarray(index * MIB, (index + 1) * MIB));
    const file = await harness.client(project).upload(project.id, Readable.from(chunks), {
      size,
      filename: 'big.bin',
      partSize: 5 * MIB,
      multipartThreshold: 0,
      concurrency: 2,
    });
    expect(file.size_bytes).toBe(size);
    await expectStored(file.id, bytes);
  });

  it('refuses a part size under 5 MiB', async () => {
    await expect(
      harness.client(project).upload(project.id, bytesOf(100), { multipartThreshold: 0, partSize: MIB }),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });
});
