import { Type } from 'typebox';
import { StringEnum } from '../../http/schemas.ts';
import { FITS, MAX_SIDE, OUTPUT_FORMATS } from '../../infra/images/render.ts';
import { DEFAULT_QUALITY } from './params.ts';

const Side = Type.Optional(
  Type.Integer({
    minimum: 1,
    maximum: MAX_SIDE,
    description: `Pixels, 1 to ${MAX_SIDE}; left out: from the other side and the aspect ratio (both out: the source's size, at most ${MAX_SIDE})`,
  }),
);

/** The rendition parameters, as `GET …/render` and `GET …/download` take them. */
export const RenditionFields = {
  width: Side,
  height: Side,
  fit: Type.Optional(
    StringEnum(
      FITS,
      'With both sides: cover (default; cropped to fill), contain (letterboxed), fill (stretched), inside (within, aspect kept)',
    ),
  ),
  format: Type.Optional(
    StringEnum(
      ['auto', ...OUTPUT_FORMATS] as const,
      'auto (default): AVIF or WebP when the Accept header takes them, else the source format when JPEG, PNG or WebP, else JPEG',
    ),
  ),
  quality: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 100,
      description: `1 to 100, default ${DEFAULT_QUALITY} (PNG is lossless)`,
    }),
  ),
  animated: Type.Optional(
    Type.Boolean({
      description: 'Keep every frame of an animated GIF or WebP (WebP output); default: the first frame',
    }),
  ),
};

export const RenderQuery = Type.Object(RenditionFields);

/** One eager thumbnail of a project's `thumbnails` setting. */
export const ThumbnailSpec = Type.Object(
  {
    width: RenditionFields.width,
    height: RenditionFields.height,
    fit: RenditionFields.fit,
    format: RenditionFields.format,
  },
  { additionalProperties: false },
);
export const MAX_THUMBNAILS = 8;

/** The query of a presigned rendition URL: the parameters, the expiry and their signature. */
export const SignedRenderQuery = Type.Object({
  ...RenditionFields,
  exp: Type.Integer({ minimum: 0 }),
  sig: Type.String({ maxLength: 128 }),
});

export const RenditionParamsPath = Type.Object({ project_id: Type.String(), file_id: Type.String() });

export const RenditionImage = Type.String({
  $id: 'RenditionImage',
  format: 'binary',
  description: 'The image: WebP, AVIF, JPEG or PNG',
});

export const renditionSchemas = [RenditionImage];
