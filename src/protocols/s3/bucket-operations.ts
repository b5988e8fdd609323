import type { Caller } from '../../domain/principal.ts';
import type { ListedFile } from '../../modules/files/key-repo.ts';
import { listVersions } from '../../modules/versions/repo.ts';
import type { Services } from '../../services.ts';
import { type Operation, ownerOf, refuseTokens, requireScope, xml } from './call.ts';
import { EMPTY_ETAG, etagOf } from './etag.ts';
import {
  decodeToken,
  encodeToken,
  encodingOf,
  listed,
  markerResume,
  pageSizeOf,
  walkKeys,
} from './listing.ts';
import { shownAt } from './objects.ts';

/** A version as ListObjectVersions lists it, its key as stored. */
type Listed = Record<string, unknown> & { Key: string };

/** A folder marker's one version, as ListObjectsV2 lists it: no bytes, kept unversioned. */
const markerVersion = ({ key, folder }: { key: string; folder: { created_at: Date } }) => ({
  Key: key,
  VersionId: 'null',
  IsLatest: true,
  LastModified: folder.created_at.toISOString(),
  ETag: EMPTY_ETAG,
  Size: 0,
  StorageClass: 'STANDARD',
});

/** Buckets (a project is one) and their listings: ListBuckets, HeadBucket, ListObjects(V2), ListObjectVersions. */
export function bucketOperations(services: Services, region: string): Record<string, Operation> {
  /** A key's versions as ListObjectVersions shows them, newest first; `null` where none are kept. */
  async function versionsOf(caller: Caller, file: ListedFile, key: string) {
    const kept = caller.project.settings.versioning_enabled ? await listVersions(services.db, file.id) : [];
    if (kept.length === 0) {
      return [
        {
          Key: key,
          VersionId: 'null',
          IsLatest: true,
          LastModified: file.updated_at.toISOString(),
          ETag: etagOf(file),
          Size: file.size_bytes,
          StorageClass: 'STANDARD',
        },
      ];
    }
    return kept.map((version, index) => ({
      Key: key,
      VersionId: version.id,
      IsLatest: index === 0,
      LastModified: version.created_at,
      ETag: index === 0 ? etagOf(file) : etagOf(version),
      Size: version.size_bytes,
      StorageClass: 'STANDARD',
    }));
  }

  return {
    'GET service': async ({ reply, caller }) =>
      xml(reply, 'ListAllMyBucketsResult', {
        Owner: ownerOf(caller),
        Buckets: {
          Bucket: [{ Name: caller.project.bucket, CreationDate: caller.project.created_at }],
        },
      }),

    'HEAD bucket': async ({ reply }) => reply.header('x-amz-bucket-region', region).send(),

    'GET bucket?location': async ({ reply }) =>
      xml(reply, 'LocationConstraint', region === 'us-east-1' ? '' : region),

    'GET bucket?versioning': async ({ reply, caller }) =>
      xml(reply, 'VersioningConfiguration', {
        Status: caller.project.settings.versioning_enabled ? 'Enabled' : undefined,
      }),

    // The bucket exists: it is the project. S3 answers its owner's create of it as done (us-east-1).
    'PUT bucket': async ({ reply, caller }) => reply.header('location', `/${caller.project.bucket}`).send(),

    'GET bucket': async ({ reply, caller, query }) => {
      requireScope(caller, 'files:read');
      refuseTokens(caller);
      const v2 = query.get('list-type') === '2';
      const prefix = query.get('prefix') ?? '';
      const delimiter = query.get('delimiter') ?? '';
      const maxKeys = pageSizeOf(query, 'max-keys');
      const { url, encode } = encodingOf(query.get('encoding-type'));
      const token = query.get('continuation-token');
      const start = v2 ? query.get('start-after') : query.get('marker');
      // V2 starts after its start-after key; a V1 marker may also be a common prefix to skip.
      const resume = v2 && token ? decodeToken(token) : markerResume(start, prefix, v2 ? '' : delimiter);
      const walk = await walkKeys(services.db, caller.project.id, { prefix, delimiter, maxKeys, resume });
      const last = walk.items.at(-1);
      const common = {
        Name: caller.project.bucket,
        Prefix: encode(prefix),
        ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
        MaxKeys: maxKeys,
        ...(url ? { EncodingType: 'url' } : {}),
        IsTruncated: walk.truncated,
      };
      // V1 names every key's owner; V2 only when asked (fetch-owner).
      const owner = !v2 || query.get('fetch-owner') === 'true' ? ownerOf(caller) : undefined;
      const page = listed(walk, encode, owner);
      if (v2) {
        return xml(reply, 'ListBucketResult', {
          ...common,
          KeyCount: walk.items.length,
          ...(token ? { ContinuationToken: token } : {}),
          ...(walk.truncated && walk.next ? { NextContinuationToken: encodeToken(walk.next) } : {}),
          ...(query.has('start-after') ? { StartAfter: encode(query.get('start-after')!) } : {}),
          ...page,
        });
      }
      const nextMarker = last && (last.kind === 'prefix' ? last.prefix : last.row.key);
      return xml(reply, 'ListBucketResult', {
        ...common,
        Marker: encode(start ?? ''),
        ...(walk.truncated && delimiter && nextMarker ? { NextMarker: encode(nextMarker) } : {}),
        ...page,
      });
    },

    'GET bucket?versions': async ({ reply, caller, query }) => {
      requireScope(caller, 'files:read');
      refuseTokens(caller);
      const prefix = query.get('prefix') ?? '';
      const delimiter = query.get('delimiter') ?? '';
      const maxKeys = pageSizeOf(query, 'max-keys');
      const { url, encode } = encodingOf(query.get('encoding-type'));
      const keyMarker = query.get('key-marker') ?? '';
      const versionIdMarker = query.get('version-id-marker') ?? '';
      // Versions and prefixes as listed; their keys written by `encode` only in the answer.
      const versions: Listed[] = [];
      const prefixes: { Prefix: string }[] = [];
      // Where the next page resumes: after the last version listed, or past the last prefix.
      let next: { key: string; versionId?: string } | undefined;
      const full = () => versions.length + prefixes.length >= maxKeys;
      /** Adds a key's versions, as many as fit; false when some did not. */
      const take = (key: string, entries: Listed[]) => {
        const fitting = entries.slice(0, maxKeys - versions.length - prefixes.length);
        versions.push(...fitting);
        if (fitting.length > 0) next = { key, versionId: String(fitting.at(-1)!.VersionId) };
        return fitting.length === entries.length;
      };
      // No room at all is an empty page that is not truncated, as S3 answers max-keys=0.
      let truncated = false;
      // The rest of the marker's key first, when the last page ended inside it.
      if (maxKeys > 0 && keyMarker && versionIdMarker) {
        const file = await shownAt(services, caller, keyMarker);
        const all = file ? await versionsOf(caller, file, keyMarker) : [];
        const at = all.findIndex((version) => version.VersionId === versionIdMarker);
        truncated = !take(keyMarker, at < 0 ? [] : all.slice(at + 1));
      }
      if (maxKeys > 0 && !truncated) {
        // One key at least, even past a page that is full: whether one follows tells it is truncated.
        const walk = await walkKeys(services.db, caller.project.id, {
          prefix,
          delimiter,
          maxKeys: Math.max(maxKeys - versions.length, 1),
          resume: markerResume(keyMarker, prefix, delimiter),
        });
        truncated = walk.truncated;
        for (const item of walk.items) {
          if (full()) {
            truncated = true;
            break;
          }
          if (item.kind === 'prefix') {
            prefixes.push({ Prefix: item.prefix });
            next = { key: item.prefix };
            continue;
          }
          const entry = item.row;
          const entries =
            'file' in entry ? await versionsOf(caller, entry.file, entry.key) : [markerVersion(entry)];
          if (!take(entry.key, entries)) {
            truncated = true;
            break;
          }
        }
      }
      const owner = ownerOf(caller);
      return xml(reply, 'ListVersionsResult', {
        Name: caller.project.bucket,
        Prefix: encode(prefix),
        KeyMarker: encode(keyMarker),
        VersionIdMarker: versionIdMarker,
        ...(truncated && next
          ? {
              NextKeyMarker: encode(next.key),
              ...(next.versionId ? { NextVersionIdMarker: next.versionId } : {}),
            }
          : {}),
        MaxKeys: maxKeys,
        ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
        ...(url ? { EncodingType: 'url' } : {}),
        IsTruncated: truncated,
        Version: versions.map((version) => ({ ...version, Key: encode(version.Key), Owner: owner })),
        CommonPrefixes: prefixes.map(({ Prefix }) => ({ Prefix: encode(Prefix) })),
      });
    },
  };
}
