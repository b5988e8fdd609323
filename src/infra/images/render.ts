import { open } from 'node:fs/promises';
import type { OutputInfo, Sharp, SharpConstructor } from 'sharp';
import { ImageError } from './errors.ts';
import { encodeInChild } from './render-pool.ts';

/** libvips' loaders of the raster formats decoded (JPEG, PNG, GIF, WebP, AVIF/HEIF, TIFF), with their subclasses. */
const RASTER_LOADERS = [
  'VipsForeignLoadJpeg',
  'VipsForeignLoadPng',
  'VipsForeignLoadNsgif',
  'VipsForeignLoadWebp',
  'VipsForeignLoadHeif',
  'VipsForeignLoadTiff',
];

let sharpLoaded: Promise<SharpConstructor> | undefined;

/**
 * sharp and libvips are loaded with the first render (about 9 MiB resident): a server that is idle,
 * or never asked for a rendition, does not hold them.
 */
function loadSharp(): Promise<SharpConstructor> {
  sharpLoaded ??= import('sharp').then(({ default: sharp }) => {
    // libvips' operation cache keeps decoded images around between renders: a renderer of many
    // different sources gains nothing from it and would hold their memory.
    sharp.cache(false);
    // Only the raster formats served are decoded: libvips' other loaders (SVG, PDF, PPM, FITS, CSV, its
    // own format, …) refuse, so a file of another kind is never parsed, and a source needs no check of
    // its leading bytes (nor opening for it) before a render.
    sharp.block({ operation: ['VipsForeignLoad'] });
    sharp.unblock({ operation: RASTER_LOADERS });
    return sharp;
  });
  return sharpLoaded;
}

export const OUTPUT_FORMATS = ['webp', 'avif', 'jpeg', 'png'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];
export const FITS = ['cover', 'contain', 'fill', 'inside'] as const;
export type Fit = (typeof FITS)[number];
/** The largest side an output may have. */
export const MAX_SIDE = 4096;

export const CONTENT_TYPE_OF: Record<OutputFormat, string> = {
  webp: 'image/webp',
  avif: 'image/avif',
  jpeg: 'image/jpeg',
  png: 'image/png',
};

/** What to make of a source: a side left out follows the source's aspect ratio. */
export interface RenderSpec {
  width?: number;
  height?: number;
  fit: Fit;
  format: OutputFormat;
  quality: number;
  /** Keep every frame of an animated source (WebP output); otherwise the first frame only. */
  animated: boolean;
}

/**
 * What is rendered: the bytes, or the path of a file holding exactly them, which libvips reads in
 * small pieces as it decodes: the whole source is never copied into memory.
 */
export type ImageSource = Buffer | string;

export interface RenderLimits {
  /** Decoded pixels a source may have (all its frames when animated). */
  maxPixels: number;
  /** A render still running after this is stopped. */
  timeoutSeconds: number;
}

/**
 * The refusal of a source past `maxPixels`, naming its size: sharp's own refusal (limitInputPixels,
 * checked on the header, before anything is decoded or allocated) does not, so the header is read again.
 */
async function pastPixelBound(source: ImageSource, spec: RenderSpec, maxPixels: number): Promise<ImageError> {
  const sharp = await loadSharp();
  const meta = await sharp(source, { limitInputPixels: false, animated: spec.animated })
    .metadata()
    .catch(() => undefined);
  const { width, height } = meta ?? {};
  const message =
    width !== undefined && height !== undefined
      ? `The image has ${width * height} pixels, more than ${maxPixels}`
      : `The image has more than ${maxPixels} pixels`;
  return new ImageError('TooLarge', message, { width, height, max_pixels: maxPixels });
}

function encode(image: Sharp, spec: RenderSpec): Sharp {
  const { quality } = spec;
  switch (spec.format) {
    case 'webp':
      return image.webp({ quality });
    case 'avif':
      // The default effort takes several times longer for a few percent fewer bytes.
      return image.avif({ quality, effort: 2 });
    case 'jpeg':
      return image.flatten({ background: '#ffffff' }).jpeg({ quality });
    case 'png':
      return image.png({ compressionLevel: 6 });
  }
}

const pastDeadline = (limits: RenderLimits) =>
  new ImageError('TooLarge', `The render took longer than ${limits.timeoutSeconds} s`, {
    timeout_seconds: limits.timeoutSeconds,
  });

/** An image rendered: its encoded bytes and size (of one frame when animated). */
export interface Rendered {
  data: Buffer;
  width: number;
  height: number;
}

/**
 * Renders `source` as `spec` says: EXIF orientation applied, every metadata block (EXIF with GPS,
 * XMP, IPTC) left out, at most MAX_SIDE on a side; refused when it is not a raster image or has more
 * than `limits.maxPixels` (from its header: a few kilobytes declaring 30000 × 30000 are refused before
 * any of that memory is allocated); stopped past `limits.timeoutSeconds`. Runs on
 * libuv's threads, never on the event loop. An AVIF is decoded and resized here, then encoded in a
 * child process from its pixels, as its encoder can only be stopped by ending its process (see
 * render-pool.ts).
 */
export async function renderImage(
  source: ImageSource,
  spec: RenderSpec,
  limits: RenderLimits,
): Promise<Rendered> {
  const started = performance.now();
  const pipeline = await resized(source, spec, limits);
  const run = (output: Sharp) => runPipeline(output, source, spec, limits);
  if (spec.format !== 'avif') {
    const { data, info } = await run(encode(pipeline, spec));
    return { data, width: info.width, height: info.pageHeight ?? info.height };
  }
  const { data, info } = await run(pipeline.raw());
  const leftMs = limits.timeoutSeconds * 1000 - (performance.now() - started);
  const channels = info.channels as 1 | 2 | 3 | 4;
  const pixels = { data, width: info.width, height: info.height, channels };
  const encoded = leftMs > 0 ? await encodeInChild({ ...pixels, quality: spec.quality }, leftMs) : undefined;
  if (!encoded) throw pastDeadline(limits);
  return { data: encoded, width: info.width, height: info.height };
}

/** Encodes raw pixels as AVIF (what a render-pool child runs). */
export async function encodeAvif(
  pixels: { data: Uint8Array; width: number; height: number; channels: 1 | 2 | 3 | 4 },
  quality: number,
): Promise<Buffer> {
  const { data, ...raw } = pixels;
  const sharp = await loadSharp();
  return encode(sharp(data, { raw }), { format: 'avif', quality } as RenderSpec).toBuffer();
}

/** The source decoded and resized as `spec` says, stopped past the deadline (sharp's timeout). */
async function resized(source: ImageSource, spec: RenderSpec, limits: RenderLimits): Promise<Sharp> {
  const { width, height, fit } = spec;
  // With one side given the other is bounded only by MAX_SIDE; `inside` keeps the aspect ratio then.
  const box =
    width !== undefined && height !== undefined
      ? { width, height, fit }
      : {
          width: width ?? MAX_SIDE,
          height: height ?? MAX_SIDE,
          fit: 'inside' as const,
          withoutEnlargement: width === undefined && height === undefined,
        };
  const sharp = await loadSharp();
  return sharp(source, {
    limitInputPixels: limits.maxPixels,
    animated: spec.animated,
    autoOrient: true,
  })
    .resize(box)
    .timeout({ seconds: limits.timeoutSeconds });
}

/**
 * Throws the error of reading `path` when it cannot be read (gone, not a file, no permission): the
 * server's failure, not the image's, which passes unchanged (an answer of 500, a thumbnail tried again).
 */
async function assertReadable(path: string): Promise<void> {
  const handle = await open(path);
  try {
    await handle.read(Buffer.alloc(1), 0, 1, 0);
  } finally {
    await handle.close();
  }
}

/** Runs the pipeline of `source`: its output, or the ImageError of its failure. */
async function runPipeline(
  pipeline: Sharp,
  source: ImageSource,
  spec: RenderSpec,
  limits: RenderLimits,
): Promise<{ data: Buffer; info: OutputInfo }> {
  try {
    return await pipeline.toBuffer({ resolveWithObject: true });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/timeout/i.test(message)) throw pastDeadline(limits);
    if (/pixel limit/i.test(message)) throw await pastPixelBound(source, spec, limits.maxPixels);
    if (typeof source === 'string') await assertReadable(source);
    if (/unsupported image format/i.test(message)) {
      throw new ImageError('NotAnImage', 'The file is not a raster image', undefined, { cause: error });
    }
    throw new ImageError('NotAnImage', 'The image cannot be decoded', undefined, { cause: error });
  }
}
