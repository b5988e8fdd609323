import { createHash } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { s3EndpointSuite } from '../../support/s3-endpoint.ts';
import { BucketModel } from './listing-model.ts';
import {
  checkListMultipartUploads,
  checkListObjects,
  checkListObjectsV2,
  checkListObjectVersions,
  type Listing,
} from './listing-walks.ts';

// Buckets of a few keys written, rewritten and deleted, every page of each listing walked and held to
// what the model says the bucket lists. COFFER_LISTING_RUNS runs more cases, COFFER_LISTING_SEED
// others; a failure prints its seed and path, which COFFER_LISTING_SEED and COFFER_LISTING_PATH replay.
const RUNS = Number(process.env.COFFER_LISTING_RUNS ?? 40);
const SEED = Number(process.env.COFFER_LISTING_SEED ?? 20_260_311);
const PATH = process.env.COFFER_LISTING_PATH;

// Thousands of requests a minute from one address: no rate limit in the way.
const { bucketWith } = s3EndpointSuite({ COFFER_RATE_LIMIT_IP_PER_MINUTE: '0' });

/**
 * Characters that order differently in UTF-8 and UTF-16 and roll up at a delimiter: ASCII, 2-byte
 * (é), 3-byte above the surrogates (～, which UTF-16 sorts after 😀), and 4-byte ones, the last
 * code point among them.
 */
const CHARACTERS = ['a', 'a', 'b', '-', '.', 'é', '～', '😀', '\u{10ffff}'];

/** A folder or file name: not `.` nor `..`, which Coffer keys hold no segment of. */
const segment = fc
  .array(fc.constantFrom(...CHARACTERS), { minLength: 1, maxLength: 3 })
  .map((chars) => chars.join(''))
  .filter((name) => name !== '.' && name !== '..');

/** A file's key: names joined by `/`, none empty (Coffer holds no `a//b` nor `/a`). */
const path = fc.array(segment, { minLength: 1, maxLength: 3 }).map((names) => names.join('/'));

/** What is done to the bucket: keys and folder markers are picked among the paths by index. */
type Op =
  | { kind: 'put'; path: number; size: number }
  | { kind: 'mark' | 'unmark'; path: number; depth: number }
  | { kind: 'delete'; path: number }
  | { kind: 'forget'; path: number; version: number }
  | { kind: 'start'; path: number }
  | { kind: 'abort'; upload: number };

const index = fc.nat({ max: 31 });
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant('put' as const), path: index, size: fc.nat({ max: 9 }) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('mark' as const), path: index, depth: index }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('unmark' as const), path: index, depth: index }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), path: index }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('forget' as const), path: index, version: index }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('start' as const), path: index }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort' as const), upload: index }) },
);

/**
 * A string to filter or start a listing at: a path's first characters (at most `chars`; the path as
 * a folder's key, maybe), or any string of the characters.
 */
const keyish = (chars: number) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.record({ path: index, cut: fc.nat({ max: chars }), folder: fc.boolean() }) },
    {
      weight: 1,
      arbitrary: fc
        .array(fc.constantFrom(...CHARACTERS, '/'), { maxLength: 4 })
        .map((chars) => chars.join('')),
    },
  );

const listing = fc.record({
  prefix: fc.oneof(fc.constant(''), keyish(3)),
  delimiter: fc.constantFrom('', '/', '/', '-', '.', 'é', '😀', '\u{10ffff}', 'a/'),
  maxKeys: fc.option(fc.nat({ max: 5 }), { nil: undefined, freq: 4 }),
  url: fc.boolean(),
  start: fc.option(fc.oneof(fc.record({ position: index }), fc.record({ text: keyish(31) })), {
    nil: undefined,
  }),
});

const bucketCase = fc.record({
  versioned: fc.boolean(),
  paths: fc.uniqueArray(path, { minLength: 1, maxLength: 12, size: 'max' }),
  ops: fc.array(op, { minLength: 1, maxLength: 40, size: 'max' }),
  listings: fc.array(listing, { minLength: 1, maxLength: 6, size: 'max' }),
});
type BucketCase = typeof bucketCase extends fc.Arbitrary<infer T> ? T : never;

/** A generated string of a case, against its paths. */
function stringOf(paths: string[], value: string | { path: number; cut: number; folder: boolean }): string {
  if (typeof value === 'string') return value;
  const key = paths[value.path % paths.length]! + (value.folder ? '/' : '');
  const chars = [...key];
  return chars.slice(0, value.cut % (chars.length + 1)).join('');
}

/** The folder marker `depth` folders down `path`. */
function markerOf(path: string, depth: number): string {
  const names = path.split('/');
  return `${names.slice(0, 1 + (depth % names.length)).join('/')}/`;
}

const md5 = (body: Uint8Array) => `"${createHash('md5').update(body).digest('hex')}"`;

/** Does `op` to the bucket and to the model alike. */
async function apply(client: S3Client, Bucket: string, model: BucketModel, paths: string[], op: Op) {
  if (op.kind === 'abort') {
    if (model.uploads.length === 0) return;
    const [upload] = model.uploads.splice(op.upload % model.uploads.length, 1);
    await client.send(new AbortMultipartUploadCommand({ Bucket, Key: upload!.key, UploadId: upload!.id }));
    return;
  }
  const path = paths[op.path % paths.length]!;
  switch (op.kind) {
    case 'put': {
      const Body = new Uint8Array(op.size).fill(0x78);
      const written = await client.send(new PutObjectCommand({ Bucket, Key: path, Body }));
      const version = { id: written.VersionId ?? 'null', size: op.size, etag: md5(Body) };
      if (model.versioned !== (written.VersionId !== undefined)) throw new Error(`PUT ${path}: version id`);
      model.put(path, version);
      return;
    }
    case 'mark': {
      // A zero-byte PUT of `dir/`: a folder made on purpose, a key of its own while nothing is under it.
      const Key = markerOf(path, op.depth);
      await client.send(new PutObjectCommand({ Bucket, Key, Body: new Uint8Array(0) }));
      model.markers.add(Key);
      return;
    }
    case 'unmark': {
      const Key = markerOf(path, op.depth);
      await client.send(new DeleteObjectCommand({ Bucket, Key }));
      model.markers.delete(Key);
      return;
    }
    case 'delete':
      await client.send(new DeleteObjectCommand({ Bucket, Key: path }));
      model.delete(path);
      return;
    case 'forget': {
      // A version, deleted for good: the one before the current becomes current when the current one
      // goes, and the key goes with its last.
      const versions = model.files.get(path) ?? [];
      if (!model.versioned || versions.length === 0) return;
      const [version] = versions.splice(op.version % versions.length, 1);
      await client.send(new DeleteObjectCommand({ Bucket, Key: path, VersionId: version!.id }));
      if (versions.length === 0) model.delete(path);
      return;
    }
    case 'start': {
      const started = await client.send(new CreateMultipartUploadCommand({ Bucket, Key: path }));
      model.start(path, started.UploadId!);
      return;
    }
  }
}

/** A new bucket with the case's writes done, and its model. */
async function bucketOf({
  versioned,
  paths,
  ops,
}: BucketCase): Promise<{ client: S3Client; name: string; model: BucketModel }> {
  const { client, name: bucket } = await bucketWith({ versioning_enabled: versioned });
  const model = new BucketModel(versioned);
  for (const each of ops) await apply(client, bucket, model, paths, each);
  return { client, name: bucket, model };
}

describe('S3 listings, page by page', () => {
  it('list what the model of the bucket lists, each key or prefix once, in UTF-8 order', async () => {
    await fc.assert(
      fc.asyncProperty(bucketCase, async (generated) => {
        const { client, name, model } = await bucketOf(generated);
        try {
          for (const asked of generated.listings) {
            const start =
              asked.start &&
              ('text' in asked.start ? { text: stringOf(generated.paths, asked.start.text) } : asked.start);
            const each: Listing = { ...asked, prefix: stringOf(generated.paths, asked.prefix), start };
            await checkListObjectsV2(client, name, model, each);
            await checkListObjects(client, name, model, each);
            await checkListObjectVersions(client, name, model, each);
            await checkListMultipartUploads(client, name, model, each);
          }
        } finally {
          client.destroy();
        }
      }),
      {
        numRuns: RUNS,
        seed: SEED,
        path: PATH,
        interruptAfterTimeLimit: 300_000,
        markInterruptAsFailure: false,
      },
    );
  }, 400_000);
});
