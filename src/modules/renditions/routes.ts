import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../../http/error-responses.ts';
import { Ref } from '../../http/schemas.ts';
import { sendSlices } from '../../http/send-slices.ts';
import { CONTENT_TYPE_OF, OUTPUT_FORMATS } from '../../infra/images/render.ts';
import { FileParams } from '../files/schemas.ts';
import { RenderQuery, RenditionImage, RenditionParamsPath, SignedRenderQuery } from './schemas.ts';
import type { NotModified, Rendition, RenditionService } from './service.ts';

/** What the service weighs of a request: the format it takes, the copy it holds. */
const conditions = (request: FastifyRequest) => ({
  accept: request.headers.accept,
  ifNoneMatch: request.headers['if-none-match'],
});

function send(
  request: FastifyRequest,
  reply: FastifyReply,
  rendition: Rendition | NotModified,
  cacheControl: string,
) {
  reply.headers({
    etag: rendition.etag,
    'cache-control': cacheControl,
    'x-content-type-options': 'nosniff',
    'content-security-policy': 'sandbox',
  });
  if (rendition.negotiated) reply.header('vary', 'Accept');
  if ('notModified' in rendition) return reply.code(304).send();
  reply.type(rendition.contentType).header('content-length', String(rendition.size));
  // Stored on the local store: written from its files as a download is.
  if (Array.isArray(rendition.body)) return sendSlices(request, reply, rendition.body);
  return reply.send(rendition.body);
}

const imageContent = Object.fromEntries(
  OUTPUT_FORMATS.map((format) => [CONTENT_TYPE_OF[format], { schema: Ref(RenditionImage) }]),
);

/** `GET …/files/{file_id}/render` (with a key), under the API prefix. */
export function renditionRoutes(renditions: RenditionService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/projects/:project_id/files/:file_id/render',
      {
        config: { access: 'files:read' },
        schema: {
          tags: ['Files'],
          operationId: 'renderFile',
          summary: 'Render an image file',
          description:
            'A resized, re-encoded copy of a ready raster image: EXIF orientation applied, metadata (GPS included) left out, the first frame of an animation unless `animated`. Made once and kept (least recently used first out); answered with an ETag and `Cache-Control: private`. 422 NOT_AN_IMAGE (SVG included), 422 IMAGE_TOO_LARGE (COFFER_IMAGE_MAX_PIXELS, COFFER_IMAGE_MAX_SOURCE_BYTES), 409 INVALID_STATE for a file not ready, 503 RENDER_BUSY with Retry-After. `GET …/download` with the same parameters answers a URL of the rendition that needs no key.',
          params: FileParams,
          querystring: RenderQuery,
          response: {
            200: { description: 'The image', content: imageContent },
            304: { description: 'Not modified (If-None-Match)', type: 'null' },
            ...errors(
              'NOT_FOUND',
              'INVALID_STATE',
              'VALIDATION_ERROR',
              'NOT_AN_IMAGE',
              'IMAGE_TOO_LARGE',
              'RENDER_BUSY',
              'STORE_UNAVAILABLE',
            ),
          },
        },
      },
      async (request, reply) => {
        const rendition = await renditions.render(
          request,
          request.params.file_id,
          request.query,
          conditions(request),
        );
        return send(request, reply, rendition, 'private');
      },
    );
  };
}

/** `GET /renditions/{project_id}/{file_id}?…&exp&sig`: presigned rendition URLs (register without a prefix). */
export function signedRenditionRoutes(renditions: RenditionService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/renditions/:project_id/:file_id',
      {
        // Presigned URLs carry their own authority: counted per client IP, as object URLs are.
        config: { access: 'public', limitGroup: 'objects' },
        schema: { hide: true, params: RenditionParamsPath, querystring: SignedRenderQuery },
      },
      async (request, reply) => {
        const { project_id: projectId, file_id: fileId } = request.params;
        const rendition = await renditions.renderSigned(
          projectId,
          fileId,
          request.query,
          conditions(request),
        );
        // The same URL always answers the same bytes until it expires: any cache may keep them that long.
        const maxAge = Math.max(0, Math.floor(rendition.expires - Date.now() / 1000));
        return send(request, reply, rendition, `public, max-age=${maxAge}, immutable`);
      },
    );
  };
}
