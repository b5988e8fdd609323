import type { Services } from '../../services.ts';
import { declaredSize } from './body.ts';
import {
  bodyOf,
  contentTypeOf,
  MAX_XML_BYTES,
  type Operation,
  ownerOf,
  readAll,
  refuseTokens,
  requestBody,
  requireScope,
  xml,
} from './call.ts';
import { checksumHeader } from './checksums.ts';
import { guardOf, writeConditionOf } from './conditions.ts';
import { partNumberOf } from './content.ts';
import { copyRangeOf, copySource } from './copy.ts';
import { S3Error } from './errors.ts';
import { etagOf } from './etag.ts';
import { metadataOf, refuseUnservedWrites, storedHeadersOf } from './headers.ts';
import { urlEncodeKey } from './keys.ts';
import { encodingOf, listingNumberOf, pageSizeOf } from './listing.ts';
import {
  abortUpload,
  completedBefore,
  completedParts,
  completeUpload,
  createUpload,
  listParts,
  listUploads,
  type UploadRef,
  uploadPart,
} from './multipart.ts';
import { verifiedBody } from './sigv4.ts';
import { taggingOf } from './tags.ts';

/** What a CompleteMultipartUpload sent again after it succeeded is refused with, before it looks again. */
const REFUSALS_OF_A_REPEAT = new Set(['NoSuchUpload', 'PreconditionFailed', 'ConditionalRequestConflict']);

/** The upload a request names: the key of its path and its `uploadId`. */
const uploadOf = (target: { key: string }, query: URLSearchParams): UploadRef => ({
  key: target.key,
  uploadId: query.get('uploadId') ?? '',
});

/** Multipart uploads: Create, UploadPart, UploadPartCopy, Complete, Abort, ListParts, ListMultipartUploads. */
export function multipartOperations(services: Services): Record<string, Operation> {
  return {
    'POST object?uploads': async ({ request, reply, caller, auth, target, query }) => {
      requireScope(caller, 'files:upload');
      refuseUnservedWrites(request.headers, ownerOf(caller).ID, auth.presigned ? query : undefined);
      const presignedQuery = auth.presigned ? query : undefined;
      const uploadId = await createUpload(services, caller, target.key, {
        contentType: contentTypeOf(request.headers['content-type']),
        metadata: metadataOf(request.headers, presignedQuery),
        headers: storedHeadersOf(request.headers),
        tags: taggingOf(request.headers, presignedQuery),
      });
      return xml(reply, 'InitiateMultipartUploadResult', {
        Bucket: caller.project.bucket,
        Key: target.key,
        UploadId: uploadId,
      });
    },

    'PUT object?partNumber': async ({ request, reply, caller, auth, target, query }) => {
      requireScope(caller, 'files:upload');
      const upload = uploadOf(target, query);
      const partNumber = partNumberOf(query.get('partNumber'));
      if (request.headers['x-amz-copy-source'] !== undefined) {
        const { content } = await copySource(services, caller, request.headers);
        const range = copyRangeOf(request.headers['x-amz-copy-source-range'], content.size);
        const bytes = await services.store.read(content.storageKey, range);
        const size = range ? range.end - range.start + 1 : content.size;
        // A part refused before its bytes are read leaves the store's stream to be closed here.
        const etag = await uploadPart(services, caller, upload, partNumber, bytes, size).finally(() =>
          bytes.destroy(),
        );
        if (content.versionId) reply.header('x-amz-copy-source-version-id', content.versionId);
        return xml(reply, 'CopyPartResult', { ETag: etag, LastModified: new Date().toISOString() });
      }
      const decoded = 'decodedLength' in auth.payload ? auth.payload.decodedLength : undefined;
      const size = declaredSize(request.headers, decoded);
      const body = bodyOf(request, auth);
      const etag = await uploadPart(services, caller, upload, partNumber, body, size);
      return reply.header('etag', etag).headers(checksumHeader(body.checksum)).send();
    },

    'POST object?uploadId': async ({ request, reply, caller, auth, target, query }) => {
      requireScope(caller, 'files:upload');
      // The checksum headers of a complete describe the whole object, not this XML.
      const body = verifiedBody(requestBody(request), auth, { headerChecksums: false });
      const parts = completedParts((await readAll(body, MAX_XML_BYTES)).toString('utf8'));
      const upload = uploadOf(target, query);
      // Sent again after it succeeded (its answer lost), a complete finds its upload no longer open,
      // and its conditions failed by the object it made: it is answered as it was.
      const again = async (error: unknown) => {
        if (!(error instanceof S3Error && REFUSALS_OF_A_REPEAT.has(error.code))) throw error;
        const done = await completedBefore(services, caller, upload);
        if (!done) throw error;
        return done;
      };
      const { file, versionId } = await guardOf(
        services,
        caller,
        target.key,
        writeConditionOf(request.headers),
      )
        .then((guard) => completeUpload(services, caller, upload, parts, guard))
        .catch(again);
      reply.header('x-coffer-file-id', file.id);
      if (versionId) reply.header('x-amz-version-id', versionId);
      return xml(reply, 'CompleteMultipartUploadResult', {
        Location: `${request.protocol}://${request.host}/s3/${caller.project.bucket}/${urlEncodeKey(target.key)}`,
        Bucket: caller.project.bucket,
        Key: target.key,
        ETag: etagOf(file),
      });
    },

    'DELETE object?uploadId': async ({ reply, caller, target, query }) => {
      requireScope(caller, 'files:upload');
      await abortUpload(services, caller, uploadOf(target, query));
      return reply.code(204).send();
    },

    'GET object?uploadId': async ({ reply, caller, target, query }) => {
      requireScope(caller, 'files:upload');
      const upload = uploadOf(target, query);
      const marker = listingNumberOf(query, 'part-number-marker', 0);
      const maxParts = pageSizeOf(query, 'max-parts');
      const { parts, truncated } = await listParts(services, caller, upload, marker, maxParts);
      const owner = ownerOf(caller);
      return xml(reply, 'ListPartsResult', {
        Bucket: caller.project.bucket,
        Key: target.key,
        UploadId: upload.uploadId,
        PartNumberMarker: marker,
        ...(truncated ? { NextPartNumberMarker: parts.at(-1)?.part_number } : {}),
        Initiator: owner,
        Owner: owner,
        MaxParts: maxParts,
        IsTruncated: truncated,
        StorageClass: 'STANDARD',
        Part: parts.map((part) => ({ PartNumber: part.part_number, ETag: part.etag, Size: part.size_bytes })),
      });
    },

    'GET bucket?uploads': async ({ reply, caller, query }) => {
      requireScope(caller, 'files:upload');
      refuseTokens(caller);
      const prefix = query.get('prefix') ?? '';
      const delimiter = query.get('delimiter') ?? '';
      const keyMarker = query.get('key-marker') ?? '';
      const uploadIdMarker = query.get('upload-id-marker') ?? '';
      const maxUploads = pageSizeOf(query, 'max-uploads');
      const { url, encode } = encodingOf(query.get('encoding-type'));
      const found = await listUploads(services, caller, {
        prefix,
        delimiter,
        keyMarker,
        uploadIdMarker,
        maxUploads,
      });
      const page = found.slice(0, maxUploads);
      const truncated = found.length > maxUploads;
      const owner = ownerOf(caller);
      const last = page.at(-1);
      const next =
        last?.kind === 'row'
          ? { NextKeyMarker: encode(last.row.key), NextUploadIdMarker: last.row.id }
          : { NextKeyMarker: last && encode(last.prefix), NextUploadIdMarker: '' };
      return xml(reply, 'ListMultipartUploadsResult', {
        Bucket: caller.project.bucket,
        KeyMarker: encode(keyMarker),
        UploadIdMarker: uploadIdMarker,
        ...(truncated ? next : {}),
        Prefix: encode(prefix),
        ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
        ...(url ? { EncodingType: 'url' } : {}),
        MaxUploads: maxUploads,
        IsTruncated: truncated,
        Upload: page.flatMap((item) =>
          item.kind === 'row'
            ? [
                {
                  Key: encode(item.row.key),
                  UploadId: item.row.id,
                  Initiated: item.row.created_at.toISOString(),
                  StorageClass: 'STANDARD',
                  Initiator: owner,
                  Owner: owner,
                },
              ]
            : [],
        ),
        CommonPrefixes: page.flatMap((item) =>
          item.kind === 'prefix' ? [{ Prefix: encode(item.prefix) }] : [],
        ),
      });
    },
  };
}
