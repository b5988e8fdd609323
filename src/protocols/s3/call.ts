import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../../domain/principal.ts';
import type { FileRow } from '../../modules/files/repo.ts';
import { accessDenied, S3Error } from './errors.ts';
import { verifiedBody } from './sigv4.ts';
import type { Authenticated } from './types.ts';
import { s3Xml } from './xml.ts';

/** A request's bucket and key, percent-decoded from its path-style URL. */
export interface Target {
  bucket?: string;
  key?: string;
}

/** What an operation is called with, once the request is authenticated and its bucket checked. */
export interface S3Call {
  request: FastifyRequest;
  reply: FastifyReply;
  caller: Caller;
  auth: Authenticated;
  target: Required<Target>;
  query: URLSearchParams;
  /** The newest file S3 shows at the target's key, when it was read with the credential. */
  atKey?: { file: FileRow | undefined };
}

/** An operation of the endpoint, by `METHOD target[?subresource]` (see operationOf in routes.ts). */
export type Operation = (call: S3Call) => Promise<unknown>;

/**
 * Refuses a caller without `scope`. Changing a file's tags (PutObjectTagging, DeleteObjectTagging)
 * takes `files:update_metadata`, as the REST API's tag endpoints do: an API key's temporary
 * credentials need it among the key's scopes. A long-lived S3 credential (files:read, files:upload,
 * files:delete) or an upload token (files:upload, files:read), whose scopes cannot name it, changes
 * tags with its write scope, files:upload, with which its writes already replace a file's metadata
 * and tags; an upload token only those of its own files, the only ones it sees.
 */
export function requireScope(
  caller: Caller,
  scope: 'files:read' | 'files:upload' | 'files:delete' | 'files:update_metadata',
): void {
  const { principal } = caller;
  if (principal.kind === 'admin') return;
  const writesTags =
    scope === 'files:update_metadata' &&
    (principal.kind === 's3_credential' || principal.kind === 'upload_token');
  if (!principal.scopes.includes(writesTags ? 'files:upload' : scope)) throw accessDenied();
}

/** The Owner (and Initiator) S3 names in listings: the bucket's organization. */
export const ownerOf = (caller: Caller) => ({
  ID: caller.project.organization_id,
  DisplayName: caller.project.organization_id,
});

/** Listings show every file of the bucket: an upload token, which sees only its own, may not list. */
export function refuseTokens(caller: Caller): void {
  if (caller.principal.kind === 'upload_token') {
    throw accessDenied('Upload token credentials may write and read their own files, not list the bucket');
  }
}

/** The raw body of a request: a stream, as the endpoint's content type parser leaves it. */
export const requestBody = (request: FastifyRequest) => (request.body as Readable | undefined) ?? request.raw;

/** The verified bytes of a request body: every signature and checksum checked as they stream. */
export const bodyOf = (request: FastifyRequest, auth: Authenticated) =>
  verifiedBody(requestBody(request), auth);

/** The most an XML request body may hold (a DeleteObjects of 1000 long keys fits). */
export const MAX_XML_BYTES = 2 * 1024 * 1024;

/** A request body read whole, refused past `limit` bytes. */
export async function readAll(body: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    length += (chunk as Buffer).length;
    if (length > limit) throw new S3Error(400, 'MaxMessageLengthExceeded', 'Your request was too big.');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** An S3 XML answer. */
export function xml(reply: FastifyReply, root: string, fields: Record<string, unknown> | string) {
  return reply
    .type('application/xml')
    .send(typeof fields === 'string' ? s3Xml(root, { '#text': fields }) : s3Xml(root, fields));
}

/** The type a PUT declares; without one, bytes of no particular type (whatever the name's extension). */
export function contentTypeOf(header: string | undefined): string {
  return header?.trim() || 'application/octet-stream';
}
