/** Listings of a large bucket through the S3 endpoint. */
import { ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { openPglite } from '../src/infra/db.ts';
import { createProject } from './client.ts';
import { type CofferServer, startCoffer } from './coffer-server.ts';
import { databaseFor } from './database.ts';
import { type BenchContext, progress } from './lib.ts';
import { seedFiles, seedInto } from './list-seed.ts';
import { NO_RATE_LIMITS } from './s3api-bucket.ts';
import { PAGE_KEYS } from './s3api-report.ts';

/** Milliseconds of each ListObjectsV2 page of a walk over the whole bucket, by continuation token. */
export async function walk(client: S3Client, bucket: string): Promise<{ times: number[]; keys: number }> {
  const times: number[] = [];
  let keys = 0;
  let ContinuationToken: string | undefined;
  do {
    const start = performance.now();
    const page = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, MaxKeys: PAGE_KEYS, ContinuationToken }),
    );
    times.push(performance.now() - start);
    keys += page.KeyCount ?? 0;
    ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (ContinuationToken);
  return { times, keys };
}

/**
 * Seeds `files` files into a new project of the server on `dataDir` (PostgreSQL: while it runs; the
 * embedded database: stopped, seeded from this process, restarted); answers the server then running.
 */
export async function seedListing(c: BenchContext, dataDir: string, server: CofferServer, files: number) {
  const project = await createProject(server);
  progress(`s3api: seeding ${files} files`);
  const report = (done: number) => progress(`s3api: ${done} of ${files} files`);
  if (c.db === 'postgres') {
    const seeded = await seedFiles((await databaseFor(dataDir))!, project.id, files, report);
    return { server, project, seeded };
  }
  await server.close();
  const db = await openPglite(dataDir);
  let seeded: Awaited<ReturnType<typeof seedInto>>;
  try {
    seeded = await seedInto(db, project.id, files, report);
  } finally {
    await db.close();
  }
  const restarted = await startCoffer(dataDir, c.server.mode, { env: NO_RATE_LIMITS });
  return { server: restarted, project, seeded };
}
