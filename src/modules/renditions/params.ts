import { validationError } from '../../domain/errors.ts';
import type { Fit, OutputFormat, RenderSpec } from '../../infra/images/render.ts';

export const DEFAULT_QUALITY = 80;

/** The rendition parameters of a request, as the query string carries them. */
export interface RenditionQuery {
  width?: number;
  height?: number;
  fit?: Fit;
  format?: OutputFormat | 'auto';
  quality?: number;
  animated?: boolean;
}

/** The parameters with their defaults filled in; `format` may still be `auto` (resolved per request). */
export type RenditionParams = Omit<RenderSpec, 'format'> & { format: OutputFormat | 'auto' };

/** The query names rendition parameters (a download URL of the original otherwise). */
export const asksRendition = (query: RenditionQuery): boolean =>
  (['width', 'height', 'fit', 'format', 'quality', 'animated'] as const).some(
    (name) => query[name] !== undefined,
  );

export function normalize(query: RenditionQuery): RenditionParams {
  const format = query.format ?? 'auto';
  const animated = query.animated ?? false;
  // Of the output formats only WebP keeps frames; `auto` then means WebP.
  if (animated && format !== 'auto' && format !== 'webp') {
    throw validationError('animated renditions are WebP: leave format out, or set it to webp or auto', {
      field: 'format',
    });
  }
  return {
    width: query.width,
    height: query.height,
    fit: query.fit ?? 'cover',
    format,
    quality: query.quality ?? DEFAULT_QUALITY,
    animated,
  };
}

/** Whether an Accept header takes `type` explicitly (a wildcard does not: browsers name AVIF and WebP). */
function accepts(accept: string | undefined, type: string): boolean {
  for (const range of (accept ?? '').toLowerCase().split(',')) {
    const [name, ...parameters] = range.split(';').map((part) => part.trim());
    if (name !== type) continue;
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  }
  return false;
}

const SOURCE_FORMATS: Record<string, OutputFormat> = {
  'image/jpeg': 'jpeg',
  'image/png': 'png',
  'image/webp': 'webp',
};

/**
 * The output format: the one asked for; for `auto`, AVIF or WebP when the request's Accept takes them
 * (WebP for animated renditions), else the source's format when it is JPEG, PNG or WebP, else JPEG.
 */
export function resolveFormat(
  params: RenditionParams,
  accept: string | undefined,
  sourceType: string,
): RenderSpec {
  if (params.format !== 'auto') return { ...params, format: params.format };
  if (params.animated) return { ...params, format: 'webp' };
  const format = accepts(accept, 'image/avif')
    ? 'avif'
    : accepts(accept, 'image/webp')
      ? 'webp'
      : (SOURCE_FORMATS[sourceType.split(';')[0]!.trim().toLowerCase()] ?? 'jpeg');
  return { ...params, format };
}

/** One spelling of the parameters: what rendition keys and URL signatures are made of. */
export function canonical(params: RenditionParams): string {
  const { width, height, fit, format, quality, animated } = params;
  return JSON.stringify([width ?? null, height ?? null, fit, format, quality, animated]);
}

/** The parameters as a query string (of a presigned URL), in the names the API takes. */
export function toQuery(params: RenditionParams): Record<string, string> {
  const query: Record<string, string> = {
    fit: params.fit,
    format: params.format,
    quality: String(params.quality),
  };
  if (params.width !== undefined) query.width = String(params.width);
  if (params.height !== undefined) query.height = String(params.height);
  if (params.animated) query.animated = 'true';
  return query;
}
