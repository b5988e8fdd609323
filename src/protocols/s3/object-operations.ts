import type { Caller } from '../../domain/principal.ts';
import { auditContext } from '../../modules/audit/service.ts';
import type { FileRow } from '../../modules/files/repo.ts';
import { findVersion, listVersions } from '../../modules/versions/repo.ts';
import type { Services } from '../../services.ts';
import {
  bodyOf,
  contentTypeOf,
  MAX_XML_BYTES,
  type Operation,
  readAll,
  requireScope,
  type S3Call,
  xml,
} from './call.ts';
import { asS3Error, malformedXml, noSuchBucket, noSuchVersion, notImplemented } from './errors.ts';
import { etagOf } from './etag.ts';
import { getMarker, isMarkerKey } from './markers.ts';
import {
  checkConditions,
  copyObject,
  copySourceOf,
  declaredSize,
  deleteObject,
  fileAt,
  metadataOf,
  metaHeaders,
  objectBody,
  putObject,
  rangeOf,
  requireReadable,
} from './objects.ts';
import { parseS3Xml } from './xml.ts';

/** Objects: GetObject, HeadObject, PutObject, CopyObject, DeleteObject, DeleteObjects. */
export function objectOperations(services: Services): Record<string, Operation> {
  /**
   * The bytes GetObject serves: the file's current content, or with `versionId` one of its versions;
   * where the project keeps versions, the answer names the version it served.
   */
  async function contentOf(caller: Caller, file: FileRow, versionId: string | null) {
    const current = {
      storageKey: file.storage_key,
      size: file.size_bytes,
      contentType: file.content_type,
      etag: etagOf(file),
      modified: file.updated_at,
    };
    if (!caller.project.settings.versioning_enabled && (versionId === null || versionId === 'null')) {
      return { ...current, versionId: undefined };
    }
    if (versionId === null || versionId === 'null') {
      const [latest] = await listVersions(services.db, file.id);
      return { ...current, versionId: latest?.id };
    }
    const version = await findVersion(services.db, file.id, versionId);
    if (!version) throw noSuchVersion();
    const isCurrent = version.storage_key === file.storage_key;
    return {
      storageKey: version.storage_key,
      size: version.size_bytes,
      contentType: version.content_type,
      etag: isCurrent ? current.etag : etagOf(version),
      modified: new Date(version.created_at),
      versionId: version.id,
    };
  }

  async function getObject({ request, reply, caller, target, query, atKey }: S3Call) {
    requireScope(caller, 'files:read');
    const file = await fileAt(services, caller, target.key, atKey);
    requireReadable(file);
    const content = await contentOf(caller, file, query.get('versionId'));
    checkConditions(request.headers, content.etag, content.modified);
    const range = rangeOf(request.headers.range, content.size);
    const header = (name: string, fallback: string) => query.get(`response-${name}`) ?? fallback;
    reply.headers({
      'content-type': header('content-type', content.contentType),
      'content-length': String(range ? range.end - range.start + 1 : content.size),
      etag: content.etag,
      'last-modified': content.modified.toUTCString(),
      'accept-ranges': 'bytes',
      'x-coffer-file-id': file.id,
      ...(content.versionId ? { 'x-amz-version-id': content.versionId } : {}),
      ...metaHeaders(file.metadata),
    });
    for (const name of [
      'content-disposition',
      'content-encoding',
      'content-language',
      'cache-control',
      'expires',
    ]) {
      const value = query.get(`response-${name}`);
      if (value !== null) reply.header(name, value);
    }
    if (range) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${content.size}`);
    if (request.method === 'HEAD' || content.size === 0) return reply.send();
    return reply.send(await objectBody(services.store, content.storageKey, range));
  }

  const readKey = (call: S3Call) =>
    isMarkerKey(call.target.key) ? getMarker(services, call) : getObject(call);

  return {
    'GET object': readKey,
    'HEAD object': readKey,

    'PUT object': async ({ request, reply, caller, auth, target, query }) => {
      requireScope(caller, 'files:upload');
      const metadata = metadataOf(request.headers, auth.presigned ? query : undefined);
      const copySource = request.headers['x-amz-copy-source'];
      if (typeof copySource === 'string') {
        const source = copySourceOf(copySource);
        if (source.bucket !== caller.project.bucket) throw noSuchBucket();
        if (source.versionId !== undefined) throw notImplemented('CopyObject of a version');
        const copied = await copyObject(services, caller, source.key, target.key, {
          replace: request.headers['x-amz-metadata-directive'] === 'REPLACE',
          contentType: request.headers['content-type'],
          metadata,
          headers: request.headers,
        });
        if (copied.file) reply.header('x-coffer-file-id', copied.file.id);
        return xml(reply, 'CopyObjectResult', {
          LastModified: (copied.file?.updated_at ?? new Date()).toISOString(),
          ETag: copied.etag,
        });
      }
      const decoded = 'decodedLength' in auth.payload ? auth.payload.decodedLength : undefined;
      const put = await putObject(services, caller, target.key, {
        size: declaredSize(request.headers, decoded),
        contentType: contentTypeOf(request.headers['content-type']),
        metadata,
        body: bodyOf(request, auth),
      });
      reply.header('etag', put.etag);
      if (put.file) reply.header('x-coffer-file-id', put.file.id);
      if (put.versionId && caller.project.settings.versioning_enabled) {
        reply.header('x-amz-version-id', put.versionId);
      }
      return reply.send();
    },

    'POST bucket?delete': async ({ request, reply, caller, auth }) => {
      requireScope(caller, 'files:delete');
      const document = parseS3Xml((await readAll(bodyOf(request, auth), MAX_XML_BYTES)).toString('utf8'));
      const listed = (document?.Delete as { Object?: { Key?: string }[]; Quiet?: string } | undefined) ?? {};
      const objects = listed.Object ?? [];
      if (
        !document?.Delete ||
        objects.length > 1000 ||
        objects.some((entry) => typeof entry.Key !== 'string')
      ) {
        throw malformedXml();
      }
      const deleted: { Key: string }[] = [];
      const errors: { Key: string; Code: string; Message: string }[] = [];
      for (const { Key } of objects as { Key: string }[]) {
        try {
          await deleteObject(services, caller, Key, auditContext(request));
          deleted.push({ Key });
        } catch (error) {
          const refused = asS3Error(request, error);
          errors.push({ Key, Code: refused.code, Message: refused.message });
        }
      }
      return xml(reply, 'DeleteResult', {
        Deleted: listed.Quiet === 'true' ? [] : deleted,
        Error: errors,
      });
    },

    'DELETE object': async ({ request, reply, caller, target }) => {
      requireScope(caller, 'files:delete');
      await deleteObject(services, caller, target.key, auditContext(request));
      return reply.code(204).send();
    },
  };
}
