import type { Caller } from '../../domain/principal.ts';
import type { ListedFile } from '../../modules/files/key-repo.ts';
import { listVersions } from '../../modules/versions/repo.ts';
import type { Services } from '../../services.ts';
import { type Operation, refuseTokens, requireScope, xml } from './call.ts';
import { etagOf } from './etag.ts';
import { decodeToken, encodeToken, listed, maxKeysOf, type Resume, walkKeys } from './listing.ts';

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
      ETag: index === 0 ? etagOf(file) : etagOf({ etag: null, checksum_sha256: version.checksum_sha256 }),
      Size: version.size_bytes,
      StorageClass: 'STANDARD',
    }));
  }

  return {
    'GET service': async ({ reply, caller }) =>
      xml(reply, 'ListAllMyBucketsResult', {
        Owner: { ID: caller.project.organization_id, DisplayName: caller.project.organization_id },
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
      const maxKeys = maxKeysOf(query.get('max-keys'));
      const urlEncoded = query.get('encoding-type') === 'url';
      const token = query.get('continuation-token');
      const start = v2 ? query.get('start-after') : query.get('marker');
      let resume: Resume | undefined = start ? { after: start } : undefined;
      if (v2 && token) resume = decodeToken(token);
      // A V1 marker that is a common prefix resumes past everything under it, as NextMarker meant.
      if (!v2 && start && delimiter && start.endsWith(delimiter) && start.startsWith(prefix)) {
        resume = { after: `${start}\u{10ffff}` };
      }
      const walk = await walkKeys(services.db, caller.project.id, { prefix, delimiter, maxKeys, resume });
      const encode = (value: string) => (urlEncoded ? encodeURIComponent(value).replace(/%2F/g, '/') : value);
      const last = walk.items.at(-1);
      const common = {
        Name: caller.project.bucket,
        Prefix: encode(prefix),
        ...(delimiter ? { Delimiter: encode(delimiter) } : {}),
        MaxKeys: maxKeys,
        ...(urlEncoded ? { EncodingType: 'url' } : {}),
        IsTruncated: walk.truncated,
      };
      const page = listed(walk, urlEncoded);
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
      const nextMarker = last && (last.kind === 'prefix' ? last.prefix : last.entry.key);
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
      const maxKeys = maxKeysOf(query.get('max-keys'));
      const keyMarker = query.get('key-marker');
      const walk = await walkKeys(services.db, caller.project.id, {
        prefix,
        delimiter,
        maxKeys,
        resume: keyMarker ? { after: keyMarker } : undefined,
      });
      // A key's versions are never split across pages: a page ends before a key that would not fit.
      const versions: Record<string, unknown>[] = [];
      const prefixes: { Prefix: string }[] = [];
      let lastKey: string | undefined;
      let truncated = walk.truncated;
      for (const item of walk.items) {
        if (item.kind === 'prefix') {
          prefixes.push({ Prefix: item.prefix });
          lastKey = item.prefix;
          continue;
        }
        const { entry } = item;
        const entries = 'file' in entry ? await versionsOf(caller, entry.file, entry.key) : [];
        if (versions.length > 0 && versions.length + entries.length > maxKeys) {
          truncated = true;
          break;
        }
        versions.push(...entries);
        lastKey = entry.key;
      }
      return xml(reply, 'ListVersionsResult', {
        Name: caller.project.bucket,
        Prefix: prefix,
        KeyMarker: keyMarker ?? '',
        VersionIdMarker: query.get('version-id-marker') ?? '',
        ...(truncated && lastKey ? { NextKeyMarker: lastKey } : {}),
        MaxKeys: maxKeys,
        ...(delimiter ? { Delimiter: delimiter } : {}),
        IsTruncated: truncated,
        Version: versions,
        CommonPrefixes: prefixes,
      });
    },
  };
}
