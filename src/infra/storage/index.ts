import { join } from 'node:path';
import type { StorageConfig } from '../../config.ts';
import { withSpans } from '../spans.ts';
import { createLocalStore } from './local/store.ts';
import type { ObjectStore } from './object-store.ts';

/** The calls that reach the disk or the bucket (presigning only signs, in memory). */
const TRACED: (keyof ObjectStore & string)[] = [
  'seal',
  'write',
  'head',
  'headPart',
  'read',
  'delete',
  'createMultipart',
  'writePart',
  'listParts',
  'completeMultipart',
  'abortMultipart',
  'removeStale',
  'check',
];

/**
 * The one place a backend is chosen: the local disk under the data dir, or an S3 bucket. The S3
 * client is loaded only for an S3 store, so that a local one never holds it in memory.
 */
export async function createObjectStore(
  storage: StorageConfig,
  local: { dataDir: string; publicUrl: string; urlSigningSecret: string },
): Promise<ObjectStore> {
  const store =
    storage.kind === 's3'
      ? (await import('./s3/store.ts')).createS3Store(storage)
      : createLocalStore({
          dir: join(local.dataDir, 'objects'),
          publicUrl: local.publicUrl,
          secret: local.urlSigningSecret,
        });
  return withSpans(store, 'store', TRACED, { 'coffer.storage.backend': storage.kind });
}
