import { create as contentDisposition } from 'content-disposition';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  badRequest,
  DomainError,
  forbidden,
  notFound,
  requestTooLarge,
  uploadInterrupted,
} from '../domain/errors.ts';
import type { Metrics } from '../infra/metrics.ts';
import type { LocalObjectStore } from '../infra/storage/local/store.ts';
import { assertKey, MAX_PART_SIZE, StoreError } from '../infra/storage/object-store.ts';
import { parseRange } from './range.ts';
import { type Count, sendSlices } from './send-slices.ts';

function keyOf(request: FastifyRequest): string {
  const key = (request.params as { '*': string })['*'];
  assertKey(key);
  return key;
}

/**
 * Whether a PUT's Content-Type is the signed one (case and spaces aside). When the signed type has no
 * parameters, the header's are ignored: browsers add `;charset=UTF-8` to text bodies.
 */
function sameType(header: string | undefined, signed: string): boolean {
  const normal = (value: string) =>
    value
      .replace(/\s*;\s*/g, ';')
      .trim()
      .toLowerCase();
  if (header === undefined) return false;
  const sent = normal(header);
  const expected = normal(signed);
  return sent === expected || (!expected.includes(';') && sent.split(';')[0] === expected);
}

async function download(store: LocalObjectStore, request: FastifyRequest, reply: FastifyReply, sent?: Count) {
  const key = keyOf(request);
  const url = store.verifyUrl('GET', key, request.query);
  if (url.kind !== 'get') throw forbidden('The URL signature is invalid');
  const info = await store.locate(key);
  if (!info) throw notFound('Object');
  const range = parseRange(request.headers.range, info.size);
  reply.headers({
    'content-type': url.contentType,
    'content-length': String(range ? range.end - range.start + 1 : info.size),
    'content-disposition': contentDisposition(url.filename),
    'x-content-type-options': 'nosniff',
    'content-security-policy': 'sandbox',
    'cache-control': `private, max-age=${Math.max(0, Math.floor(url.expires - Date.now() / 1000))}`,
    'accept-ranges': 'bytes',
    etag: info.etag,
  });
  if (range) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${info.size}`);
  return sendSlices(request, reply, info.slices(range), sent);
}

/** Passes the chunks of `source` through, counting them as they are read. */
async function* counted(source: AsyncIterable<Buffer>, received: Count): AsyncIterable<Buffer> {
  for await (const chunk of source) {
    received(chunk.length);
    yield chunk;
  }
}

async function upload(
  store: LocalObjectStore,
  request: FastifyRequest,
  reply: FastifyReply,
  received?: Count,
) {
  try {
    const key = keyOf(request);
    const url = store.verifyUrl('PUT', key, request.query);
    if (url.kind === 'get') throw forbidden('The URL signature is invalid');
    const header = request.headers['content-length'];
    const declared = header === undefined ? undefined : Number(header);
    if (url.kind === 'put' && !sameType(request.headers['content-type'], url.contentType)) {
      throw forbidden('The Content-Type header does not match the signed content type');
    }
    // A whole object, or a part signed for a size, takes exactly the signed bytes.
    if (url.size !== undefined) {
      if (declared !== undefined && declared !== url.size) {
        throw badRequest(`Content-Length is ${declared} but the URL is signed for ${url.size} bytes`);
      }
    } else if (declared !== undefined && declared > MAX_PART_SIZE) {
      throw requestTooLarge(MAX_PART_SIZE);
    }
    // Iterating must not destroy the request when the store stops early, so the error can still be answered.
    const chunks = { [Symbol.asyncIterator]: () => request.raw.iterator({ destroyOnReturn: false }) };
    const body = received ? counted(chunks, received) : chunks;
    const etag = await store.receive(url, body);
    return reply.header('etag', etag).send();
  } catch (error) {
    if (request.raw.errored && !(error instanceof DomainError || error instanceof StoreError)) {
      throw uploadInterrupted();
    }
    throw error;
  }
}

/**
 * The presigned URL endpoints of a local store, at the absolute paths /objects/<key> (register
 * without a prefix). The plugin is encapsulated: its catch-all content type parser hands PUT bodies
 * over unread, so no body limit or parser applies to them.
 */
export function objectRoutes(store: LocalObjectStore, metrics?: Metrics): FastifyPluginAsync {
  const uploaded = metrics?.localStoreBytes.labels('upload');
  const downloaded = metrics?.localStoreBytes.labels('download');
  const received = uploaded && ((bytes: number) => uploaded.inc(bytes));
  const sent = downloaded && ((bytes: number) => downloaded.inc(bytes));
  return async (instance) => {
    instance.removeAllContentTypeParsers();
    instance.addContentTypeParser('*', (_request, _payload, done) => done(null));
    // Presigned URLs carry their own authority: counted per client IP, apart from the API.
    const options = {
      schema: { hide: true },
      config: { access: 'public' as const, limitGroup: 'objects' as const },
    };
    instance.route({
      ...options,
      method: ['GET', 'HEAD'],
      url: '/objects/*',
      handler: (request, reply) => download(store, request, reply, sent),
    });
    instance.route({
      ...options,
      method: 'PUT',
      url: '/objects/*',
      handler: (request, reply) => upload(store, request, reply, received),
    });
  };
}
