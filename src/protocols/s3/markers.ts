import type { Services } from '../../services.ts';
import { requireScope, type S3Call } from './call.ts';
import { checkConditions } from './conditions.ts';
import { rangeOf, readPartNumber } from './content.ts';
import { invalidPartNumber, noSuchKey, noSuchVersion } from './errors.ts';
import { EMPTY_ETAG } from './etag.ts';
import { markerShown } from './objects.ts';

/**
 * Folder markers: a key ending in `/` names a folder, which is an object of no bytes when it was made
 * on purpose (a PUT of the key, or the REST API), as a zero-byte `dir/` object is in S3; the folders a
 * key's path implied are none.
 */
export const isMarkerKey = (key: string) => key.endsWith('/');

/** GetObject and HeadObject of a marker: no bytes, the empty ETag, modified when the folder was made. */
export async function getMarker(
  services: Pick<Services, 'folders'>,
  { request, reply, caller, target, query }: S3Call,
) {
  requireScope(caller, 'files:read');
  const partNumber = readPartNumber(request.headers, query);
  const marker = await markerShown(services, caller, target.key.slice(0, -1));
  if (!marker) throw noSuchKey(target.key);
  const versionId = query.get('versionId');
  if (versionId !== null && versionId !== 'null') throw noSuchVersion(target.key, versionId);
  checkConditions(request.headers, { etag: EMPTY_ETAG, modified: marker.created_at });
  rangeOf(request.headers.range, 0);
  // A marker is an object written whole: its one part is itself.
  if (partNumber !== undefined && partNumber > 1) throw invalidPartNumber(partNumber, 1);
  return reply
    .headers({
      'content-type': 'application/x-directory',
      'content-length': '0',
      etag: EMPTY_ETAG,
      'last-modified': marker.created_at.toUTCString(),
      'accept-ranges': 'bytes',
    })
    .send();
}
