import type { RenderSpec } from '../../infra/images/render.ts';
import { sha256Hex } from '../../lib/secrets.ts';
import type * as files from '../files/repo.ts';
import { canonical, type RenditionParams, resolveFormat } from './params.ts';

/** The rendition a request asks of a file: the format resolved, its key and ETag. */
export interface Target {
  spec: RenderSpec;
  key: string;
  etag: string;
  negotiated: boolean;
}

/** What names a file's renditions, with a request's parameters: its content and its type. */
export type Content = Pick<files.FileRow, 'storage_key' | 'etag' | 'content_type'>;

/**
 * The key and ETag of a rendition: the source's content and the normalised parameters. The content
 * is named by its object (key and ETag, both fixed when it was sealed; new content is a new object)
 * rather than by checksum_sha256, which on S3 is known only after the digest job: a rendition made
 * before it would otherwise be made again after it.
 */
export function identify(file: Pick<files.FileRow, 'id' | 'storage_key' | 'etag'>, spec: RenderSpec) {
  const hash = sha256Hex(JSON.stringify([file.storage_key, file.etag, canonical(spec)]));
  return { key: `renditions/${file.id}/${hash}`, etag: `"${hash}"` };
}

/** The rendition that parameters and an Accept header ask of a file's content. */
export function targetOf(file: Content & { id: string }, params: RenditionParams, accept?: string): Target {
  const spec = resolveFormat(params, accept, file.content_type);
  return { spec, negotiated: params.format === 'auto', ...identify(file, spec) };
}
