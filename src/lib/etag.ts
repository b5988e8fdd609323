/** An ETag's opaque value, as compared: S3 clients and browsers send ETags with or without their quotes. */
export const bareEtag = (etag: string) => etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '');

/** Whether one item of an If-Match or If-None-Match list is `*` (any). */
const isAny = (tag: string) => tag.trim() === '*';

/** Whether an If-Match or If-None-Match list is `*` (any). */
export const anyEtag = (list: string) => list.split(',').some(isAny);

/** Whether an If-Match or If-None-Match list is `*` (any) or names `etag` (quoted or not, weak or strong). */
export function listsEtag(list: string, etag: string): boolean {
  const bare = bareEtag(etag);
  return list.split(',').some((tag) => isAny(tag) || bareEtag(tag) === bare);
}
