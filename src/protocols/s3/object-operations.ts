import type { Caller } from '../../domain/principal.ts';
import { sendSlices } from '../../http/send-slices.ts';
import type { AuditContext } from '../../modules/audit/schemas.ts';
import { auditContext } from '../../modules/audit/service.ts';
import type { Services } from '../../services.ts';
import { declaredSize } from './body.ts';
import {
  bodyOf,
  contentTypeOf,
  MAX_XML_BYTES,
  type Operation,
  ownerOf,
  readAll,
  requireScope,
  type S3Call,
  xml,
} from './call.ts';
import { checksumElements, checksumHeader, requestedAlgorithm, storedChecksumHeaders } from './checksums.ts';
import { checkConditions, guardOf, writeConditionOf } from './conditions.ts';
import { checkVersionId, contentOf, objectBody, partOf, rangeOf, readPartNumber } from './content.ts';
import { copyObject, copySource, metadataDirectiveOf } from './copy.ts';
import { asS3Error, malformedXml } from './errors.ts';
import {
  metadataOf,
  metaHeaders,
  refuseUnservedWrites,
  responseOverrides,
  storedHeadersOf,
} from './headers.ts';
import { getMarker, isMarkerKey } from './markers.ts';
import { deleteObject, deleteObjectVersion, fileAt, putObject, requireReadable } from './objects.ts';
import { taggingCountOf, taggingDirectiveOf, taggingOf } from './tags.ts';
import { parseS3Xml } from './xml.ts';

/**
 * Whether a GetObject or HeadObject asks for the object's checksums (`x-amz-checksum-mode: ENABLED`,
 * by header or, on a presigned URL, by query parameter).
 */
function checksumModeOf(
  headers: Record<string, string | string[] | undefined>,
  presignedQuery?: URLSearchParams,
): boolean {
  const mode = headers['x-amz-checksum-mode'] ?? presignedQuery?.get('x-amz-checksum-mode');
  return typeof mode === 'string' && mode.trim().toUpperCase() === 'ENABLED';
}

/** Objects: GetObject, HeadObject, PutObject, CopyObject, DeleteObject, DeleteObjects. */
export function objectOperations(services: Services): Record<string, Operation> {
  /** DeleteObject of the key, or with a version id of that version only. */
  const deleteOne = (caller: Caller, key: string, versionId: string | null, audit: AuditContext) =>
    versionId === null
      ? deleteObject(services, caller, key, audit)
      : deleteObjectVersion(services, caller, key, versionId, audit);

  async function getObject({ request, reply, caller, auth, target, query, atKey }: S3Call) {
    requireScope(caller, 'files:read');
    const overrides = responseOverrides(query);
    const partNumber = readPartNumber(request.headers, query);
    const checksumMode = checksumModeOf(request.headers, auth.presigned ? query : undefined);
    const file = await fileAt(services, caller, target.key, atKey);
    // HeadObject answers a file still being checked with its headers, as S3 does: only its bytes wait.
    if (request.method !== 'HEAD') requireReadable(file);
    const content = await contentOf(services, caller, file, {
      key: target.key,
      versionId: query.get('versionId'),
    });
    checkConditions(request.headers, content);
    // A part is read as the range it spans; a part of no bytes has none.
    const part = partNumber === undefined ? undefined : await partOf(services.store, content, partNumber);
    const range = part ? part.range : rangeOf(request.headers.range, content.size);
    const length = range ? range.end - range.start + 1 : part ? 0 : content.size;
    // The checksums are of the whole object: a range answers none, nor a part short of the object
    // (told by its bytes: a store may not say how many parts there are).
    const whole = part ? length === content.size : range === undefined;
    reply.headers({
      'content-type': content.contentType,
      'content-length': String(length),
      etag: content.etag,
      'last-modified': content.modified.toUTCString(),
      'accept-ranges': 'bytes',
      'x-coffer-file-id': file.id,
      // The stored headers, the Content-Type as it was sent among them (see storedHeadersOf).
      ...content.headers,
      ...(content.versionId ? { 'x-amz-version-id': content.versionId } : {}),
      ...(part?.partsCount === undefined ? {} : { 'x-amz-mp-parts-count': String(part.partsCount) }),
      ...(checksumMode && whole ? storedChecksumHeaders(content) : {}),
      // The file's tags, whichever version is read.
      ...taggingCountOf(file.tags),
      ...metaHeaders(file.metadata),
      ...overrides,
    });
    if (range) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${content.size}`);
    if (request.method === 'HEAD' || length === 0) return reply.send();
    const body = await objectBody(services.store, content.storageKey, range);
    // The local store's bytes go from its files to the socket, as a presigned download's do.
    return Array.isArray(body) ? sendSlices(request, reply, body) : reply.send(body);
  }

  const readKey = async (call: S3Call) => {
    requireScope(call.caller, 'files:read');
    checkVersionId(call.query.get('versionId'));
    return isMarkerKey(call.target.key) ? getMarker(services, call) : getObject(call);
  };

  return {
    'GET object': readKey,
    'HEAD object': readKey,

    'PUT object': async ({ request, reply, caller, auth, target, query }) => {
      requireScope(caller, 'files:upload');
      refuseUnservedWrites(request.headers, ownerOf(caller).ID, auth.presigned ? query : undefined);
      const metadata = metadataOf(request.headers, auth.presigned ? query : undefined);
      const headers = storedHeadersOf(request.headers);
      const tags = taggingOf(request.headers, auth.presigned ? query : undefined);
      if (request.headers['x-amz-copy-source'] !== undefined) {
        const directive = metadataDirectiveOf(request.headers);
        // COPY gives the destination the source's tags; REPLACE exactly those sent, none without x-amz-tagging.
        const replaceTags = taggingDirectiveOf(request.headers) === 'REPLACE';
        const checksumAlgorithm = requestedAlgorithm(request.headers['x-amz-checksum-algorithm']);
        const source = await copySource(services, caller, request.headers);
        // If-None-Match and If-Match hold the destination to a condition, as on a PutObject.
        const guard = await guardOf(services, caller, target.key, writeConditionOf(request.headers));
        const copied = await copyObject(services, caller, source, target.key, {
          replace: directive === 'REPLACE',
          contentType: request.headers['content-type'],
          metadata,
          headers,
          tags: replaceTags ? (tags ?? []) : undefined,
          checksumAlgorithm,
          guard,
        });
        if (source.content.versionId) reply.header('x-amz-copy-source-version-id', source.content.versionId);
        if (copied.file) reply.header('x-coffer-file-id', copied.file.id);
        if (copied.versionId) reply.header('x-amz-version-id', copied.versionId);
        return xml(reply, 'CopyObjectResult', {
          LastModified: (copied.file?.updated_at ?? new Date()).toISOString(),
          ETag: copied.etag,
          ...checksumElements(copied.checksum),
        });
      }
      const decoded = 'decodedLength' in auth.payload ? auth.payload.decodedLength : undefined;
      const size = declaredSize(request.headers, decoded);
      const guard = await guardOf(services, caller, target.key, writeConditionOf(request.headers));
      const body = bodyOf(request, auth);
      const put = await putObject(services, caller, target.key, {
        size,
        contentType: contentTypeOf(request.headers['content-type']),
        // Without x-amz-meta-* headers, new content keeps the file's metadata.
        metadata: Object.keys(metadata).length > 0 ? metadata : undefined,
        // Without x-amz-tagging, the file keeps its tags (they are the file's, not its content's).
        tags,
        // Unlike metadata, a PutObject's headers replace the object's, none sent clearing them.
        headers,
        body,
        guard,
      });
      reply.header('etag', put.etag).headers(checksumHeader(body.checksum));
      if (put.file) reply.header('x-coffer-file-id', put.file.id);
      if (put.versionId) reply.header('x-amz-version-id', put.versionId);
      return reply.send();
    },

    'POST bucket?delete': async ({ request, reply, caller, auth }) => {
      requireScope(caller, 'files:delete');
      const document = parseS3Xml((await readAll(bodyOf(request, auth), MAX_XML_BYTES)).toString('utf8'));
      const listed =
        (document?.Delete as
          | { Object?: { Key?: string; VersionId?: string }[]; Quiet?: string }
          | undefined) ?? {};
      const objects = listed.Object ?? [];
      if (
        !document?.Delete ||
        objects.length > 1000 ||
        objects.some(
          (entry) =>
            typeof entry.Key !== 'string' ||
            (entry.VersionId !== undefined && typeof entry.VersionId !== 'string'),
        )
      ) {
        throw malformedXml();
      }
      const deleted: { Key: string; VersionId?: string }[] = [];
      const errors: { Key: string; VersionId?: string; Code: string; Message: string }[] = [];
      for (const { Key, VersionId } of objects as { Key: string; VersionId?: string }[]) {
        try {
          await deleteOne(caller, Key, VersionId ?? null, auditContext(request));
          deleted.push({ Key, VersionId });
        } catch (error) {
          const refused = asS3Error(request, error);
          errors.push({ Key, VersionId, Code: refused.code, Message: refused.message });
        }
      }
      return xml(reply, 'DeleteResult', {
        Deleted: listed.Quiet === 'true' ? [] : deleted,
        Error: errors,
      });
    },

    'DELETE object': async ({ request, reply, caller, target, query }) => {
      requireScope(caller, 'files:delete');
      const versionId = query.get('versionId');
      // DeleteObjects answers such an id of a key as a version it does not have, as S3 does.
      checkVersionId(versionId);
      await deleteOne(caller, target.key, versionId, auditContext(request));
      if (versionId !== null) reply.header('x-amz-version-id', versionId);
      return reply.code(204).send();
    },
  };
}
