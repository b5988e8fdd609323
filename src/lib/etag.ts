/** An ETag's opaque value, as compared: S3 clients and browsers send ETags with or without their quotes. */
export const bareEtag = (etag: string) => etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '');

/** Whether one item of an If-Match or If-None-Match list is `*` (any). */
const isAny = (tag: string) => tag.trim() === '*';

/** Whether an If-Match or If-None-Match list is `*` (any). */
export const anyEtag = (list: string) => list.split(',').some(isAny);

/**
 * Whether an If-Match or If-None-Match list is `*` (any) or names `etag`, quoted or not. If-None-Match
 * compares weakly (a `W/` tag names the same bytes); If-Match strongly (RFC 9110, 13.1.1): a weak tag
 * never meets it, as it cannot promise the bytes a write or a read of ranges relies on.
 */
export function listsEtag(list: string, etag: string, comparison: 'weak' | 'strong' = 'weak'): boolean {
  const bare = bareEtag(etag);
  return list.split(',').some((item) => {
    const tag = item.trim();
    if (isAny(tag)) return true;
    if (comparison === 'strong' && tag.startsWith('W/')) return false;
    return bareEtag(tag) === bare;
  });
}
