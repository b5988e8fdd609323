/** An ETag's opaque value, as compared: S3 clients and browsers send ETags with or without their quotes. */
export const bareEtag = (etag: string) => etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '');
