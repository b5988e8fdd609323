import type { FileRow } from '../../modules/files/repo.ts';

/** The MD5 of no bytes: the ETag of a folder key and of an empty object. */
export const EMPTY_ETAG = '"d41d8cd98f00b204e9800998ecf8427e"';

/**
 * The ETag S3 clients see of a file: the one its bytes were sealed with (an MD5 where they came
 * through S3), else its SHA-256 for files stored before ETags were kept.
 */
export const etagOf = (file: Pick<FileRow, 'etag' | 'checksum_sha256'>) =>
  file.etag ?? (file.checksum_sha256 ? `"${file.checksum_sha256}"` : '""');
