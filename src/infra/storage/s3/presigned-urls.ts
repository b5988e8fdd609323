import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { create as contentDisposition } from 'content-disposition';
import { assertKey, checkPartNumber, isStoreError, type ObjectStore, StoreError } from '../object-store.ts';
import { checkSize } from './bodies.ts';
import { call, type S3Bucket } from './bucket.ts';
import { uploadsOf } from './multipart.ts';

/**
 * The URLs the S3 store presigns with SigV4, through which clients move bytes straight to the bucket:
 * uploads (sealed here), downloads and parts.
 *
 * Write-once without conditional writes: an upload URL is a presigned UploadPart of a one-part
 * multipart upload, so the bytes become an object only when Coffer completes that upload (seal),
 * after which the URL answers NoSuchUpload; no URL is ever issued for the object's own key. The
 * part URL signs Content-Length and Content-Type, so a browser sends exactly what it declared
 * (an empty object too: a part of zero bytes may be the only one).
 */

/** SigV4 presigned URLs live at most a week. */
const MAX_URL_SECONDS = 604_800;

/**
 * Signing options for a URL valid until `expiresAt`, never less: SigV4 counts the lifetime from
 * X-Amz-Date, which has whole seconds, so the signing date is the current second, taken down.
 */
function lifetime(expiresAt: Date): { signingDate: Date; expiresIn: number } {
  const signingDate = new Date(Math.floor(Date.now() / 1000) * 1000);
  const expiresIn = Math.ceil((expiresAt.getTime() - signingDate.getTime()) / 1000);
  if (!Number.isFinite(expiresIn) || expiresIn < 1 || expiresIn > MAX_URL_SECONDS) {
    throw new StoreError('InvalidArgument', `URL lifetimes run from 1 to ${MAX_URL_SECONDS} seconds`);
  }
  return { signingDate, expiresIn };
}

export function presignedUrls(
  bucket: S3Bucket,
  store: ObjectStore,
): Pick<ObjectStore, 'presignUpload' | 'seal' | 'presignGet' | 'presignPart'> {
  const { client, Bucket } = bucket;
  return {
    async presignUpload(key, { size, contentType, expiresAt }) {
      assertKey(key);
      checkSize(size, 'size_bytes');
      const signed = { ...lifetime(expiresAt), signableHeaders: new Set(['content-type']) };
      const { UploadId } = await call('start upload', () =>
        client.send(new CreateMultipartUploadCommand({ Bucket, Key: key, ContentType: contentType })),
      );
      const part = new UploadPartCommand({ Bucket, Key: key, UploadId, PartNumber: 1, ContentLength: size });
      // UploadPart has no Content-Type field: set the header so that it is signed, and the browser
      // cannot send other bytes than the type it declared.
      part.middlewareStack.add(
        (next) => async (args) => {
          (args.request as { headers: Record<string, string> }).headers['content-type'] = contentType;
          return next(args);
        },
        { step: 'build', name: 'cofferSignedContentType' },
      );
      return call('presign upload', () => getSignedUrl(client, part, signed));
    },

    async seal(key) {
      assertKey(key);
      // Usually one upload (its URL's), or none once sealed: list, ListParts, Complete.
      const uploads = await uploadsOf(bucket, key);
      for (const id of uploads) {
        const [part] = await store.listParts(key, id).catch((error) => {
          if (isStoreError(error, 'NoSuchUpload')) return [];
          throw error;
        });
        if (part?.partNumber !== 1) continue;
        try {
          const done = await call('seal upload', () =>
            client.send(
              new CompleteMultipartUploadCommand({
                Bucket,
                Key: key,
                UploadId: id,
                MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.etag }] },
              }),
            ),
          );
          // A start the SDK retried may have left another, empty upload of the key.
          for (const other of uploads) if (other !== id) await store.abortMultipart(key, other);
          // radosgw answers an empty ETag on complete: then the object's own.
          return done.ETag ? { size: part.size, etag: done.ETag } : store.head(key);
        } catch (error) {
          // Sealed by a concurrent call meanwhile: what stands is the object.
          const sealed = await store.head(key);
          if (sealed) return sealed;
          throw error;
        }
      }
      return store.head(key);
    },

    async presignGet(key, { expiresAt, filename, contentType }) {
      assertKey(key);
      return call('presign download', () =>
        getSignedUrl(
          client,
          new GetObjectCommand({
            Bucket,
            Key: key,
            ResponseContentDisposition: contentDisposition(filename),
            ResponseContentType: contentType,
          }),
          lifetime(expiresAt),
        ),
      );
    },

    async presignPart(key, uploadId, partNumber, { expiresAt, size }) {
      assertKey(key);
      checkPartNumber(partNumber);
      if (size === undefined) {
        throw new StoreError(
          'InvalidArgument',
          'size is required: part URLs are signed for the exact part size',
          {
            field: 'size',
          },
        );
      }
      checkSize(size, 'size');
      return call('presign part', () =>
        getSignedUrl(
          client,
          new UploadPartCommand({
            Bucket,
            Key: key,
            UploadId: uploadId,
            PartNumber: partNumber,
            ContentLength: size,
          }),
          lifetime(expiresAt),
        ),
      );
    },
  };
}
