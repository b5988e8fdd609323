import { join } from 'node:path';
import type { StorageConfig } from '../../config.ts';
import { createLocalStore } from './local/store.ts';
import type { ObjectStore } from './object-store.ts';
import { createS3Store } from './s3.ts';

/** The one place a backend is chosen: the local disk under the data dir, or an S3 bucket. */
export function createObjectStore(
  storage: StorageConfig,
  local: { dataDir: string; publicUrl: string; urlSigningSecret: string },
): ObjectStore {
  if (storage.kind === 's3') return createS3Store(storage);
  return createLocalStore({
    dir: join(local.dataDir, 'objects'),
    publicUrl: local.publicUrl,
    secret: local.urlSigningSecret,
  });
}
